#include "nats_queue.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cereal/types/string.hpp"
#include "nlohmann/json.hpp"
#include "postal/mail/mail_errors.h"
#include "postal/runtime/logger.h"
#include "postal/wire/absl_compat.h"
#include "postal/wire/codec.h"

namespace postal::mail::nats {
namespace {

// Batches of at least this many acks go out gathered on the bulk connection (one write).
constexpr size_t kGatherFrom = 8;

// A letter as the body of a stream message; `to` is the mailbox, known from the subject.
struct StoredLetter {
  std::string id, from;
  wire::Headers headers;
  uint64_t type_hash = 0;  // 0: no body
  std::string bytes;
  template <class A>
  void serialize(A& a) {
    a(id, from, headers, type_hash, bytes);
  }
};

// FNV-1a over `bytes` from `basis`: a consumer name that is the same in every process.
uint64_t fnv1a(std::string_view bytes, uint64_t basis) {
  uint64_t h = basis;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t count_of(const nlohmann::json& j, std::string_view key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}

// The delivery count and stream sequence from a JetStream ack subject:
// `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.…` (9 tokens) or, with a domain,
// `$JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<sseq>.…` (11 or more).
bool parse_ack_subject(std::string_view subject, uint64_t& delivered, uint64_t& sseq) {
  std::vector<std::string> t = absl::StrSplit(sv(subject), '.');
  if (t.size() < 9 || t[0] != "$JS" || t[1] != "ACK") return false;
  const size_t at = t.size() == 9 ? 4 : 6;
  return absl::SimpleAtoi(t[at], &delivered) && absl::SimpleAtoi(t[at + 1], &sseq);
}

// The address a mailbox subject names; nullopt for a subject that is not one.
std::optional<std::string> address_of(std::string_view subject, std::string_view subjects) {
  if (subject.substr(0, subjects.size()) != subjects) return std::nullopt;
  const std::string_view h = subject.substr(subjects.size());
  if (h.empty() || h.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < h.size(); i += 2) {
    int v = 0;
    for (char c : h.substr(i, 2)) {
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return std::nullopt;
      v = v * 16 + d;
    }
    out.push_back(static_cast<char>(v));
  }
  return out;
}

const char* ack_body(AckKind kind) {
  switch (kind) {
    case AckKind::kAck:
      return "+ACK";
    case AckKind::kNak:
      return "-NAK";
    case AckKind::kTerm:
      return "+TERM";
    case AckKind::kProgress:
      return "+WPI";
  }
  return "+ACK";
}

}  // namespace

QueueStream::QueueStream(const NatsLink& link, const NatsLink& bulk, Config config)
    : link_(link),
      bulk_(bulk),
      config_(std::move(config)),
      stream_(absl::StrCat(config_.prefix, "_QUEUE")),
      subjects_(absl::StrCat(absl::AsciiStrToLower(config_.prefix), ".queue.")) {}

absl::Status QueueStream::ensure() {
  int jerr = 0;
  absl::StatusOr<nlohmann::json> info =
      link_.api(absl::StrCat("STREAM.INFO.", stream_), nlohmann::json::object(), &jerr);
  if (!info.ok() && jerr == JSStreamNotFoundErr) {
    info = link_.api(absl::StrCat("STREAM.CREATE.", stream_),
                     nlohmann::json{{"name", stream_},
                                    {"subjects", {absl::StrCat(subjects_, ">")}},
                                    {"storage", "file"},
                                    {"retention", "workqueue"},
                                    {"discard", "old"},
                                    {"num_replicas", config_.replicas}});
  }
  if (!info.ok()) return info.status();
  if (inbox_ == nullptr) {
    inbox_ = std::make_unique<AckInbox>(link_, 4096);
    if (absl::Status s = inbox_->start(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string QueueStream::subject(const std::string& address) const {
  return absl::StrCat(subjects_, hex(address));
}

std::string QueueStream::consumer_name(const std::string& address) const {
  return absl::StrFormat("Q%016x%016x", fnv1a(address, 0xcbf29ce484222325ULL),
                         fnv1a(address, 0x84222325cbf29ce4ULL));
}

absl::Status QueueStream::ensure_consumer(const std::string& address) {
  {
    absl::MutexLock lock(&mu_);
    if (consumers_.contains(address)) return absl::OkStatus();
  }
  const std::string name = consumer_name(address);
  // Create only when absent: JetStream 2.9 would update an existing consumer to this provider's
  // settings, so the first provider to use a mailbox sets its ack wait for everyone.
  int jerr = 0;
  absl::StatusOr<nlohmann::json> made = link_.api(
      absl::StrCat("CONSUMER.INFO.", stream_, ".", name), nlohmann::json::object(), &jerr);
  if (!made.ok() && jerr == JSConsumerNotFoundErr) {
    made = link_.api(absl::StrCat("CONSUMER.DURABLE.CREATE.", stream_, ".", name),
                     nlohmann::json{{"stream_name", stream_},
                                    {"config",
                                     {{"durable_name", name},
                                      {"deliver_policy", "all"},
                                      {"ack_policy", "explicit"},
                                      {"ack_wait", absl::ToInt64Nanoseconds(config_.ack_wait)},
                                      {"max_deliver", -1},
                                      {"filter_subject", subject(address)},
                                      {"max_ack_pending", config_.max_ack_pending},
                                      {"max_waiting", 1024},
                                      {"num_replicas", config_.replicas}}}});
  }
  if (!made.ok()) return made.status();
  absl::MutexLock lock(&mu_);
  if (consumers_.size() >= 65536)
    consumers_.clear();  // bounded: forgotten ones are looked up again
  consumers_.insert(address);
  return absl::OkStatus();
}

absl::StatusOr<std::string> QueueStream::encode(const Letter& letter) const {
  StoredLetter stored{letter.id, letter.from, letter.headers, 0, {}};
  if (!letter.body.empty()) {
    absl::StatusOr<std::string> bytes = letter.body.bytes();
    if (!bytes.ok()) return bytes.status();
    stored.type_hash = letter.body.type_hash();
    stored.bytes = *std::move(bytes);
  }
  absl::StatusOr<std::string> body = wire::encode(stored, "a letter");
  if (!body.ok()) return body.status();
  if (absl::Status fits = link_.fits_payload(body->size()); !fits.ok()) return fits;
  return body;
}

absl::StatusOr<uint64_t> QueueStream::publish(const std::string& address, const Letter& letter) {
  absl::StatusOr<std::string> body = encode(letter);
  if (!body.ok()) return body.status();
  const std::string subj = subject(address);
  jsPubAck* ack = nullptr;
  jsErrCode jerr = jsErrCode(0);
  natsStatus s = js_Publish(&ack, link_.js(), subj.c_str(), body->data(),
                            static_cast<int>(body->size()), nullptr, &jerr);
  if (s != NATS_OK) return link_.error(absl::StrCat("storing a letter for ", address), s, jerr);
  const uint64_t seq = ack->Sequence;
  jsPubAck_Destroy(ack);
  return seq;
}

void QueueStream::publish_async(const std::string& address, const Letter& letter, Published done) {
  absl::StatusOr<std::string> body = encode(letter);
  if (!body.ok()) return std::move(done)(body.status());
  inbox_->publish(subject(address), *body, std::move(done));
}

absl::StatusOr<std::vector<Pulled>> QueueStream::pull(const std::string& address, size_t batch,
                                                      absl::Duration wait) {
  if (absl::Status s = ensure_consumer(address); !s.ok()) return s;
  natsInbox* inbox = nullptr;
  natsSubscription* sub = nullptr;
  natsStatus s = natsInbox_Create(&inbox);
  if (s == NATS_OK) s = natsConnection_SubscribeSync(&sub, link_.nc(), inbox);
  nlohmann::json request{{"batch", batch}};
  if (wait > absl::ZeroDuration()) {
    request["expires"] = absl::ToInt64Nanoseconds(wait);
  } else {
    request["no_wait"] = true;
  }
  const std::string body = request.dump();
  const std::string next =
      absl::StrCat("$JS.API.CONSUMER.MSG.NEXT.", stream_, ".", consumer_name(address));
  if (s == NATS_OK) {
    s = natsConnection_PublishRequest(link_.nc(), next.c_str(), inbox, body.data(),
                                      static_cast<int>(body.size()));
  }
  std::vector<Pulled> out;
  const std::string& to = address;
  // The server ends a request it cannot fill with a status message (404 none, 408 expired);
  // one it fills ends with its last message.
  const int64_t limit_ms = absl::ToInt64Milliseconds(wait) + link_.timeout_ms();
  while (s == NATS_OK && out.size() < batch) {
    natsMsg* msg = nullptr;
    s = natsSubscription_NextMsg(&msg, sub, limit_ms);
    if (s != NATS_OK) break;
    const char* status = nullptr;
    if (natsMsgHeader_Get(msg, "Status", &status) == NATS_OK) {
      natsMsg_Destroy(msg);
      break;
    }
    Pulled p;
    p.ack_subject = natsMsg_GetReply(msg) != nullptr ? natsMsg_GetReply(msg) : "";
    parse_ack_subject(p.ack_subject, p.deliveries, p.stream_seq);
    absl::StatusOr<StoredLetter> stored = wire::decode<StoredLetter>(
        std::string_view(natsMsg_GetData(msg), static_cast<size_t>(natsMsg_GetDataLength(msg))),
        "a stored letter");
    natsMsg_Destroy(msg);
    if (!stored.ok()) {
      runtime::Logger::mail().warn(absl::StrCat("nats provider: message ", p.stream_seq, " of ", to,
                                                " does not decode (", stored.status().ToString(),
                                                "); terminated"));
      ack(p.ack_subject, AckKind::kTerm);
      continue;
    }
    p.letter.id = std::move(stored->id);
    p.letter.from = std::move(stored->from);
    p.letter.to = to;
    p.letter.headers = std::move(stored->headers);
    if (stored->type_hash != 0) {
      p.letter.body = Body::from_bytes(stored->type_hash, std::move(stored->bytes));
    }
    out.push_back(std::move(p));
  }
  if (sub != nullptr) {
    natsSubscription_Unsubscribe(sub);
    natsSubscription_Destroy(sub);
  }
  natsInbox_Destroy(inbox);
  // The server answers every pull, even one it cannot fill (a status message): silence means it
  // is away, which must not read as an empty mailbox.
  if (s != NATS_OK && out.empty()) return link_.error(absl::StrCat("fetching from ", address), s);
  return out;
}

bool QueueStream::ack(const std::string& ack_subject, AckKind kind) {
  if (ack_subject.empty()) return false;
  const char* body = ack_body(kind);
  natsMsg* reply = nullptr;
  natsStatus s = natsConnection_RequestString(&reply, link_.nc(), ack_subject.c_str(), body,
                                              link_.timeout_ms());
  if (reply != nullptr) natsMsg_Destroy(reply);
  if (s != NATS_OK) {
    runtime::Logger::mail().warn(absl::StrCat("nats provider: ", body, " to ", ack_subject,
                                              " was not confirmed: ", natsStatus_GetText(s)));
  }
  return s == NATS_OK;
}

std::vector<bool> QueueStream::ack_many(const std::vector<std::string>& ack_subjects,
                                        AckKind kind) {
  // One connection's acks reach the consumer in order and are processed in order, so the
  // server's confirmation of the last one confirms every one before it.
  std::vector<bool> confirmed(ack_subjects.size(), false);
  size_t last = ack_subjects.size();
  while (last > 0 && ack_subjects[last - 1].empty()) --last;
  if (last == 0) return confirmed;
  // The bulk connection reconnects on its own: while it is away the batch goes the plain way.
  if (last >= kGatherFrom && natsConnection_Status(bulk_.nc()) == NATS_CONN_STATUS_CONNECTED) {
    return ack_gathered(ack_subjects, last, kind);
  }
  const char* body = ack_body(kind);
  for (size_t i = 0; i + 1 < last; ++i) {
    if (ack_subjects[i].empty()) continue;
    if (natsConnection_PublishString(link_.nc(), ack_subjects[i].c_str(), body) != NATS_OK) {
      return confirmed;  // not sent: nothing is known to be settled
    }
  }
  if (ack(ack_subjects[last - 1], kind)) {
    for (size_t i = 0; i < last; ++i) confirmed[i] = !ack_subjects[i].empty();
  }
  return confirmed;
}

std::vector<bool> QueueStream::ack_gathered(const std::vector<std::string>& ack_subjects,
                                            size_t last, AckKind kind) {
  std::vector<bool> confirmed(ack_subjects.size(), false);
  natsConnection* nc = bulk_.nc();
  natsInbox* inbox = nullptr;
  natsSubscription* sub = nullptr;
  natsStatus s = natsInbox_Create(&inbox);
  if (s == NATS_OK) s = natsConnection_SubscribeSync(&sub, nc, inbox);
  const char* body = ack_body(kind);
  for (size_t i = 0; s == NATS_OK && i + 1 < last; ++i) {
    if (!ack_subjects[i].empty())
      s = natsConnection_PublishString(nc, ack_subjects[i].c_str(), body);
  }
  if (s == NATS_OK) {
    s = natsConnection_PublishRequestString(nc, ack_subjects[last - 1].c_str(), inbox, body);
  }
  // One write for the batch; the reply to the last ack says the server processed them all.
  if (s == NATS_OK) s = natsConnection_FlushTimeout(nc, bulk_.timeout_ms());
  natsMsg* reply = nullptr;
  if (s == NATS_OK) s = natsSubscription_NextMsg(&reply, sub, bulk_.timeout_ms());
  if (reply != nullptr) natsMsg_Destroy(reply);
  if (sub != nullptr) {
    natsSubscription_Unsubscribe(sub);
    natsSubscription_Destroy(sub);
  }
  natsInbox_Destroy(inbox);
  if (s == NATS_OK) {
    for (size_t i = 0; i < last; ++i) confirmed[i] = !ack_subjects[i].empty();
  } else {
    runtime::Logger::mail().warn(
        absl::StrCat("nats provider: ", body, " of ", last,
                     " copies was not confirmed: ", natsStatus_GetText(s)));
  }
  return confirmed;
}

absl::StatusOr<QueueCounts> QueueStream::counts(const std::string& address) {
  QueueCounts c;
  const std::string subj = subject(address);
  absl::StatusOr<nlohmann::json> info =
      link_.api(absl::StrCat("STREAM.INFO.", stream_), nlohmann::json{{"subjects_filter", subj}});
  if (!info.ok()) return info.status();
  const nlohmann::json::json_pointer subjects("/state/subjects");
  if (info->contains(subjects)) c.stored = count_of(info->at(subjects), subj);
  int jerr = 0;
  absl::StatusOr<nlohmann::json> consumer =
      link_.api(absl::StrCat("CONSUMER.INFO.", stream_, ".", consumer_name(address)),
                nlohmann::json::object(), &jerr);
  if (consumer.ok()) {
    c.consumer = true;
    c.ack_pending = count_of(*consumer, "num_ack_pending");
  } else if (jerr != JSConsumerNotFoundErr) {
    return consumer.status();
  }
  return c;
}

absl::StatusOr<std::vector<std::string>> QueueStream::mailboxes() {
  std::set<std::string> found;
  absl::StatusOr<nlohmann::json> info =
      link_.api(absl::StrCat("STREAM.INFO.", stream_),
                nlohmann::json{{"subjects_filter", absl::StrCat(subjects_, ">")}});
  if (!info.ok()) return info.status();
  const nlohmann::json::json_pointer subjects("/state/subjects");
  if (info->contains(subjects) && info->at(subjects).is_object()) {
    for (const auto& [subject, n] : info->at(subjects).items()) {
      if (std::optional<std::string> a = address_of(subject, subjects_)) found.insert(*a);
    }
  }
  // Drained mailboxes keep their consumer: list them too, a page at a time.
  for (uint64_t offset = 0;;) {
    absl::StatusOr<nlohmann::json> page =
        link_.api(absl::StrCat("CONSUMER.LIST.", stream_), nlohmann::json{{"offset", offset}});
    if (!page.ok()) return page.status();
    auto consumers = page->find("consumers");
    if (consumers == page->end() || !consumers->is_array() || consumers->empty()) break;
    for (const nlohmann::json& c : *consumers) {
      const nlohmann::json::json_pointer filter("/config/filter_subject");
      if (c.contains(filter) && c.at(filter).is_string()) {
        if (std::optional<std::string> a = address_of(c.at(filter).get<std::string>(), subjects_)) {
          found.insert(*a);
        }
      }
    }
    offset += consumers->size();
    if (offset >= count_of(*page, "total")) break;
  }
  return std::vector<std::string>(found.begin(), found.end());
}

absl::StatusOr<uint64_t> QueueStream::purge() {
  absl::StatusOr<nlohmann::json> r =
      link_.api(absl::StrCat("STREAM.PURGE.", stream_), nlohmann::json::object());
  if (!r.ok()) return r.status();
  return count_of(*r, "purged");
}

}  // namespace postal::mail::nats
