// MailboxHost's consuming verbs: fetch batches with the long poll (M-RECV-6), settlement one by
// one and in batches, lease renewal and nack with a delay (M-ACK-6).
//
// A fetch is answered from whichever thread has the batch — the host actor when copies are
// queued, else the thread that queues the first one, or the provider's clock at the deadline —
// through the host's late replies, so a long poll never holds the host actor.
#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "host_core.h"
#include "host_replies.h"
#include "postal/mail/mailbox_host.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

using post_internal::failed;
using post_internal::HostCore;
using post_internal::mem_address;
using post_internal::sender_proc;

// Body bytes one fetch reply carries at most: half the channel's 8 MiB frame, so the letters'
// headers and keys fit beside them. A caller's smaller max_bytes wins.
constexpr uint64_t kMaxReplyBodyBytes = 4 << 20;
// The longest long poll the host holds (a caller asking for more waits this long).
constexpr absl::Duration kMaxHostFetchWait = absl::Minutes(5);

absl::Duration duration_of(int64_t ns) {
  // INT64_MAX ns is what an infinite duration becomes in older clients: never expires, too.
  return ns == std::numeric_limits<int64_t>::max() ? absl::ZeroDuration() : absl::Nanoseconds(ns);
}

CopyKey key_at(const MailAddress& mem, const WireKey& k) {
  return CopyKey{mem.canonical(), k.send_id, k.lease_id};
}

}  // namespace

absl::Status MailboxHost::handle(actors::Context& cx, MailFetch m) {
  absl::StatusOr<MailAddress> from = mem_address(m.address);
  if (!from.ok()) {
    m.reply_to.send(cx, failed(from.status()));
    return absl::OkStatus();
  }
  FetchOptions o;
  o.ack = m.manual ? AckMode::kManual : AckMode::kAuto;
  o.ack_timeout = duration_of(m.ack_timeout_ns);
  o.max_messages = m.max_messages;
  o.max_bytes = m.max_bytes == 0 ? kMaxReplyBodyBytes : std::min(m.max_bytes, kMaxReplyBodyBytes);
  o.max_wait = std::clamp(absl::Nanoseconds(m.max_wait_ns), absl::ZeroDuration(), kMaxHostFetchWait);
  core_->provider().fetch_batch_async(
      *from, o,
      [weak = std::weak_ptr<HostCore>(core_), late = core_->late_replies(), proc = sender_proc(cx),
       reply_to = std::move(m.reply_to)](absl::StatusOr<std::vector<Delivery>> batch) mutable {
        if (!batch.ok()) return late->send(reply_to, failed(batch.status()));
        std::shared_ptr<HostCore> core = weak.lock();
        MailReply r;
        for (Delivery& d : *batch) {
          absl::StatusOr<WireLetter> w = WireLetter::of(d.letter());
          if (!w.ok()) continue;  // an unserializable body stays leased: the lease runs out
          r.letters.push_back(*std::move(w));
          r.keys.push_back(WireKey{d.key().address, d.key().send_id, d.key().lease_id});
          r.expires_ns.push_back(d.lease_expires_at() ? absl::ToUnixNanos(*d.lease_expires_at())
                                                      : 0);
          if (!d.settled() && core) {
            // The lease now belongs to the remote consumer: it settles by key.
            core->record_lease(d.key(), proc);
            d.detach();
          }
        }
        late->send(reply_to, std::move(r));
      });
  return absl::OkStatus();
}

absl::Status MailboxHost::handle(actors::Context& cx, MailSettleMany m) {
  std::optional<Disposition> disposition = parse_disposition(m.disposition);
  if (!disposition.has_value()) {
    m.reply_to.send(cx, failed(absl::InvalidArgumentError(absl::StrCat(
                            "settle: unknown disposition '", sv(m.disposition),
                            "'; use handled, discard, unhandled or terminate"))));
    return absl::OkStatus();
  }
  if (m.keys.size() > kMaxFetchBatch) {
    m.reply_to.send(cx, failed(absl::InvalidArgumentError(absl::StrCat(
                            "settle: ", m.keys.size(), " keys in one batch; at most ",
                            kMaxFetchBatch))));
    return absl::OkStatus();
  }
  // A key whose address does not parse names nothing: it does not take effect.
  std::vector<CopyKey> keys;
  std::vector<size_t> index;
  for (size_t i = 0; i < m.keys.size(); ++i) {
    absl::StatusOr<MailAddress> at = mem_address(m.keys[i].address);
    if (!at.ok()) continue;
    keys.push_back(key_at(*at, m.keys[i]));
    index.push_back(i);
  }
  std::vector<bool> took = core_->provider().settle_all(keys, *disposition);
  MailReply r;
  r.flags.assign(m.keys.size(), 0);
  for (size_t k = 0; k < index.size() && k < took.size(); ++k) r.flags[index[k]] = took[k];
  m.reply_to.send(cx, std::move(r));
  return absl::OkStatus();
}

absl::Status MailboxHost::handle(actors::Context& cx, MailLease m) {
  absl::StatusOr<MailAddress> at = mem_address(m.key.address);
  if (!at.ok()) {
    m.reply_to.send(cx, failed(at.status()));
    return absl::OkStatus();
  }
  MailReply r;
  if (m.renew) {
    std::optional<std::optional<absl::Time>> renewed = core_->provider().renew(key_at(*at, m.key));
    r.flag = renewed.has_value();
    if (renewed.has_value() && renewed->has_value()) {
      r.lease_expires_ns = absl::ToUnixNanos(**renewed);
    }
  } else {
    r.flag = core_->provider().nack(key_at(*at, m.key),
                                    std::max(absl::Nanoseconds(m.delay_ns), absl::ZeroDuration()));
  }
  m.reply_to.send(cx, std::move(r));
  return absl::OkStatus();
}

}  // namespace postal::mail
