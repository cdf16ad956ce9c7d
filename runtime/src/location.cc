#include "postal/runtime/location.h"

#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/node_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "postal/runtime/log_rate_limit.h"
#include "postal/runtime/logger.h"
#include "postal/wire/untrusted_scope.h"
#include "text_memo.h"

namespace postal::runtime {
namespace {

using address_internal::quote;

constexpr std::string_view kChannelForms =
    "write inproc://N, ipc:///absolute/path, ipc://@abstract-name, tcp://host:port "
    "(IPv6 in brackets, e.g. tcp://[::1]:4000) or nats://host:port/subject";

absl::Status channel_error(std::string_view text, std::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad channel address ", quote(text), ": ", std::string(problem)));
}

// R-ADDR-4: ipc paths and abstract names fit in sun_path and stay printable.
absl::Status check_ipc_name(std::string_view name, bool abstract) {
  const std::string_view what = abstract ? "the abstract socket name" : "the ipc path";
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), " is empty"));
  }
  if (name.size() > ChannelAddr::kMaxIpcPath) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), " is ", name.size(),
                                                   " bytes long; a Unix socket allows at most ",
                                                   ChannelAddr::kMaxIpcPath));
  }
  if (!abstract && name.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(what), " ", quote(name),
                     " is not absolute; write ipc:///absolute/path or ipc://@abstract-name"));
  }
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(what), " ", quote(name), " contains a control character"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> normalize_ipv6(std::string_view host) {
  char in[INET6_ADDRSTRLEN + 1];
  in6_addr addr;
  if (host.size() >= sizeof(in) || host.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("bad IPv6 address ", quote(host)));
  }
  host.copy(in, host.size());
  in[host.size()] = '\0';
  if (inet_pton(AF_INET6, in, &addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad IPv6 address ", quote(host), "; write it in brackets, e.g. tcp://[::1]:4000"));
  }
  char out[INET6_ADDRSTRLEN];
  if (inet_ntop(AF_INET6, &addr, out, sizeof(out)) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("bad IPv6 address ", quote(host)));
  }
  return std::string(out);
}

absl::Status check_ipv4(std::string_view host) {
  int parts = 0;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = host.find('.', start);
    const std::string_view part =
        host.substr(start, dot == std::string_view::npos ? host.npos : dot - start);
    absl::StatusOr<std::uint64_t> value =
        address_internal::parse_decimal(part, "the IPv4 byte", 255);
    if (!value.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad IPv4 address ", quote(host), ": ", value.status().message()));
    }
    ++parts;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (parts != 4) {
    return absl::InvalidArgumentError(absl::StrCat("bad IPv4 address ", quote(host), ": it has ",
                                                   parts, " parts; write four, e.g. 127.0.0.1"));
  }
  return absl::OkStatus();
}

// A hostname (RFC 1123), returned in lowercase; an all-numeric host must be an IPv4 address.
absl::StatusOr<std::string> normalize_hostname(std::string_view host) {
  if (host.empty()) return absl::InvalidArgumentError("the host is empty");
  if (host.find_first_not_of("0123456789.") == std::string_view::npos) {
    if (absl::Status status = check_ipv4(host); !status.ok()) return status;
    return std::string(host);
  }
  const std::string rule =
      "; a hostname is dot-separated parts of 1-63 letters, digits and '-', not starting or "
      "ending with '-', at most 253 characters";
  if (host.size() > 253) {
    return absl::InvalidArgumentError(absl::StrCat("bad host ", quote(host), ": too long", rule));
  }
  std::string out(host);
  std::size_t part_start = 0;
  for (std::size_t i = 0; i <= out.size(); ++i) {
    if (i == out.size() || out[i] == '.') {
      const std::size_t len = i - part_start;
      if (len == 0 || len > 63 || out[part_start] == '-' || out[i - 1] == '-') {
        return absl::InvalidArgumentError(absl::StrCat("bad host ", quote(host), ": bad part ",
                                                       quote(host.substr(part_start, len)), rule));
      }
      part_start = i + 1;
      continue;
    }
    char& c = out[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
      return absl::InvalidArgumentError(absl::StrCat("bad host ", quote(host), ": character ",
                                                     quote(host.substr(i, 1)), " is not allowed",
                                                     rule));
    }
  }
  return out;
}

absl::StatusOr<std::string> normalize_host(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return normalize_ipv6(host.substr(1, host.size() - 2));
  }
  if (host.find(':') != std::string_view::npos) return normalize_ipv6(host);
  return normalize_hostname(host);
}

// `rest` is what follows "tcp://".
absl::StatusOr<ChannelAddr> parse_tcp(std::string_view rest) {
  std::size_t colon;
  if (!rest.empty() && rest.front() == '[') {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError(
          "missing ']' after the IPv6 address; write tcp://[::1]:4000");
    }
    colon = close + 1;
    if (colon < rest.size() && rest[colon] != ':') {
      return absl::InvalidArgumentError(
          "unexpected text after ']'; write tcp://[ipv6]:port, e.g. tcp://[::1]:4000");
    }
  } else {
    colon = rest.find(':');
  }
  if (colon >= rest.size()) {
    return absl::InvalidArgumentError("missing ':port'; write tcp://host:port");
  }
  absl::StatusOr<std::uint64_t> port =
      address_internal::parse_decimal(rest.substr(colon + 1), "the tcp port", 65535);
  if (!port.ok()) return port.status();
  return ChannelAddr::tcp(rest.substr(0, colon), static_cast<std::uint16_t>(*port));
}

// `rest` is what follows "nats://": host:port/subject.
absl::StatusOr<ChannelAddr> parse_nats(std::string_view rest) {
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos) {
    return absl::InvalidArgumentError(
        "missing '/subject'; write nats://host:port/subject, e.g. nats://127.0.0.1:4222/shop.orders");
  }
  absl::StatusOr<ChannelAddr> server = parse_tcp(rest.substr(0, slash));
  if (!server.ok()) return server.status();
  return ChannelAddr::nats(server->host(), server->port(), rest.substr(slash + 1));
}

absl::StatusOr<ChannelAddr> parse_ipc(std::string_view rest) {
  if (!rest.empty() && rest.front() == '@') return ChannelAddr::ipc_abstract(rest.substr(1));
  if (!rest.empty() && rest.front() == '/') return ChannelAddr::ipc(rest);
  return absl::InvalidArgumentError(
      "an ipc address is ipc:///absolute/path or ipc://@abstract-name");
}

[[noreturn]] void precondition_failed(const char* what, const Location& location) {
  Logger::runtime().critical(absl::StrCat(what, " called on a Location without a via (",
                                         location.to_string(), "); check is_via() first"));
  flush_logs();
  std::abort();
}

}  // namespace

ChannelAddr ChannelAddr::inproc(std::uint64_t number) {
  ChannelAddr addr;
  addr.number_ = number;
  return addr;
}

absl::StatusOr<ChannelAddr> ChannelAddr::ipc(std::string_view path) {
  if (absl::Status status = check_ipc_name(path, false); !status.ok()) return status;
  ChannelAddr addr;
  addr.transport_ = Transport::kIpc;
  addr.text_ = std::string(path);
  return addr;
}

absl::StatusOr<ChannelAddr> ChannelAddr::ipc_abstract(std::string_view name) {
  if (absl::Status status = check_ipc_name(name, true); !status.ok()) return status;
  ChannelAddr addr;
  addr.transport_ = Transport::kIpc;
  addr.abstract_ = true;
  addr.text_ = std::string(name);
  return addr;
}

absl::StatusOr<ChannelAddr> ChannelAddr::tcp(std::string_view host, std::uint16_t port) {
  absl::StatusOr<std::string> normalized = normalize_host(host);
  if (!normalized.ok()) return normalized.status();
  ChannelAddr addr;
  addr.transport_ = Transport::kTcp;
  addr.number_ = port;
  addr.text_ = *std::move(normalized);
  return addr;
}

absl::StatusOr<ChannelAddr> ChannelAddr::nats(std::string_view host, std::uint16_t port,
                                               std::string_view subject) {
  absl::StatusOr<ChannelAddr> server = tcp(host, port);
  if (!server.ok()) return server.status();
  bool ok = !subject.empty() && subject.size() <= kMaxNatsSubject;
  int tokens = 0;
  for (std::size_t start = 0; ok && start <= subject.size();) {
    std::size_t dot = subject.find('.', start);
    if (dot == std::string_view::npos) dot = subject.size();
    const std::string_view token = subject.substr(start, dot - start);
    ok = !token.empty() && ++tokens <= 16 &&
         std::all_of(token.begin(), token.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-';
         });
    start = dot + 1;
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the NATS subject ", quote(subject), " is not 1-16 dot-separated tokens of A-Z, a-z, "
        "0-9, '_' and '-' (at most ", kMaxNatsSubject, " bytes, no wildcards), e.g. shop.orders"));
  }
  ChannelAddr addr = *std::move(server);
  addr.transport_ = Transport::kNats;
  addr.subject_ = std::string(subject);
  return addr;
}

std::string ChannelAddr::to_string() const {
  switch (transport_) {
    case Transport::kInproc:
      return absl::StrCat("inproc://", number_);
    case Transport::kIpc:
      return absl::StrCat(abstract_ ? "ipc://@" : "ipc://", text_);
    case Transport::kTcp:
      if (text_.find(':') != std::string::npos) {
        return absl::StrCat("tcp://[", text_, "]:", number_);
      }
      return absl::StrCat("tcp://", text_, ":", number_);
    case Transport::kNats:
      if (text_.find(':') != std::string::npos) {
        return absl::StrCat("nats://[", text_, "]:", number_, "/", subject_);
      }
      return absl::StrCat("nats://", text_, ":", number_, "/", subject_);
  }
  return "?";  // Unreachable: transport_ is always one of the three.
}

absl::StatusOr<ChannelAddr> ChannelAddr::parse(std::string_view text) {
  const std::size_t sep = text.find("://");
  if (sep == std::string_view::npos) {
    return channel_error(text, absl::StrCat("missing \"://\"; ", std::string(kChannelForms)));
  }
  const std::string_view scheme = text.substr(0, sep);
  const std::string_view rest = text.substr(sep + 3);
  absl::StatusOr<ChannelAddr> parsed;
  if (scheme == "inproc") {
    absl::StatusOr<std::uint64_t> number =
        address_internal::parse_decimal(rest, "the inproc number", UINT64_MAX);
    parsed = number.ok() ? absl::StatusOr<ChannelAddr>(inproc(*number)) : number.status();
  } else if (scheme == "ipc") {
    parsed = parse_ipc(rest);
  } else if (scheme == "tcp") {
    parsed = parse_tcp(rest);
  } else if (scheme == "nats") {
    parsed = parse_nats(rest);
  } else {
    return channel_error(text, absl::StrCat("unknown channel scheme ", quote(scheme), "; ",
                                            std::string(kChannelForms)));
  }
  if (!parsed.ok()) return channel_error(text, std::string(parsed.status().message()));
  return parsed;
}

const Location::Rep* Location::interned_default() {
  static const Rep* const kInterned = intern(Rep{});
  return kInterned;
}

const Location::Rep& Location::rep() const {
  static const Rep* const kDefault = new Rep();
  return rep_ != nullptr ? *rep_ : *kDefault;
}

struct Location::RepHash {
  size_t operator()(const Rep& r) const { return absl::HashOf(r.vias, r.addr); }
};
struct Location::RepEq {
  bool operator()(const Rep& a, const Rep& b) const { return a.vias == b.vias && a.addr == b.addr; }
};

namespace {

// The interned representations. Never destroyed: addresses in statics may outlive any destructor
// order. R-FLOW-4: what network input may add is bounded, as for labels (label.h).
template <class Set>
struct RepTable {
  absl::Mutex mu;
  Set reps ABSL_GUARDED_BY(mu);
  std::size_t untrusted_count ABSL_GUARDED_BY(mu) = 0;
};
std::atomic<std::size_t> untrusted_location_budget{65536};

// One table per set type, i.e. one (Location's Rep is private: intern() names the type).
template <class Set>
RepTable<Set>& rep_table() {
  static RepTable<Set>* const table = new RepTable<Set>();
  return *table;
}

}  // namespace

void Location::set_untrusted_budget(std::size_t locations) {
  untrusted_location_budget.store(locations, std::memory_order_relaxed);
}
std::size_t Location::untrusted_budget() {
  return untrusted_location_budget.load(std::memory_order_relaxed);
}

const Location::Rep* Location::intern(Rep rep, bool untrusted) {
  auto& table = rep_table<absl::node_hash_set<Rep, RepHash, RepEq>>();
  absl::MutexLock lock(&table.mu);
  if (untrusted) {
    if (auto it = table.reps.find(rep); it != table.reps.end()) return &*it;
    if (table.untrusted_count >= untrusted_budget()) return nullptr;
    ++table.untrusted_count;
  }
  return &*table.reps.insert(std::move(rep)).first;  // node_hash_set: the element never moves
}

std::size_t Location::untrusted_count() {
  auto& table = rep_table<absl::node_hash_set<Rep, RepHash, RepEq>>();
  absl::MutexLock lock(&table.mu);
  return table.untrusted_count;
}

Location Location::addr(ChannelAddr channel) {
  return Location(intern(Rep{{}, std::move(channel)}));
}

Location Location::via(Uid gateway, Location inner) {
  std::vector<Uid> vias;
  vias.reserve(inner.vias().size() + 1);
  vias.push_back(gateway);
  vias.insert(vias.end(), inner.vias().begin(), inner.vias().end());
  return Location(intern(Rep{std::move(vias), inner.channel()}));
}

const Uid& Location::via_uid() const {
  if (!is_via()) precondition_failed("Location::via_uid()", *this);
  return vias().front();
}

Location Location::inner() const {
  if (!is_via()) precondition_failed("Location::inner()", *this);
  // A via location's rep is interned (rep_ is not null), and so is what it memoizes.
  std::atomic<const Rep*>& memo = rep_->inner.rep;
  if (const Rep* known = memo.load(std::memory_order_acquire)) return Location(known);
  const Rep* inner = intern(Rep{std::vector<Uid>(vias().begin() + 1, vias().end()), channel()});
  memo.store(inner, std::memory_order_release);
  return Location(inner);
}

std::string Location::to_string() const {
  std::string out;
  for (const Uid& via : vias()) absl::StrAppend(&out, via.to_string(), ".");
  absl::StrAppend(&out, channel().to_string());
  return out;
}

absl::StatusOr<Location> Location::parse(std::string_view text) {
  const std::size_t sep = text.find("://");
  if (sep == std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad location ", quote(text), ": missing a channel URL; write [via.]...",
                     "channel, e.g. gw1.tcp://127.0.0.1:4000; ", std::string(kChannelForms)));
  }
  const std::size_t dot = text.rfind('.', sep);
  const std::size_t channel_start = dot == std::string_view::npos ? 0 : dot + 1;
  absl::StatusOr<ChannelAddr> channel = ChannelAddr::parse(text.substr(channel_start));
  if (!channel.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad location ", quote(text), ": ", channel.status().message()));
  }
  std::vector<Uid> vias;
  std::size_t start = 0;
  while (start < channel_start) {
    const std::size_t end = text.find('.', start);  // Found: text[dot] is '.'.
    absl::StatusOr<Uid> via = Uid::parse(text.substr(start, end - start));
    if (!via.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("bad location ", quote(text), ": bad via ",
                                                     quote(text.substr(start, end - start)), ": ",
                                                     via.status().message()));
    }
    vias.push_back(*via);
    start = end + 1;
  }
  const Rep* rep = intern(Rep{std::move(vias), *std::move(channel)}, wire::UntrustedScope::active());
  if (rep == nullptr) {
    // R-FLOW-4: untrusted input cannot grow the process-wide table without bound.
    static LogRateLimit limit(absl::Seconds(1));
    const std::string why = absl::StrCat(
        "location ", quote(text), " is new and the ", untrusted_budget(),
        " locations that network input may add are used up (a peer sends unique addresses); the "
        "envelope is refused");
    limit.log(Logger::runtime(), LogLevel::kWarn, why);
    return absl::ResourceExhaustedError(why);
  }
  return Location(rep);
}

std::ostream& operator<<(std::ostream& os, ChannelAddr::Transport transport) {
  switch (transport) {
    case ChannelAddr::Transport::kInproc:
      return os << "inproc";
    case ChannelAddr::Transport::kIpc:
      return os << "ipc";
    case ChannelAddr::Transport::kTcp:
      return os << "tcp";
    case ChannelAddr::Transport::kNats:
      return os << "nats";
  }
  return os << "Transport(" << static_cast<int>(transport) << ")";
}

std::ostream& operator<<(std::ostream& os, const ChannelAddr& addr) {
  return os << addr.to_string();
}

std::ostream& operator<<(std::ostream& os, const Location& location) {
  return os << location.to_string();
}

}  // namespace postal::runtime

namespace postal::runtime {
namespace {
// Keyed by the interned representation (never freed, so never reused for another location).
thread_local internal::Memo<const void*, std::string> rendered_locations;
thread_local internal::Memo<std::string, Location> parsed_locations;
}  // namespace

std::string_view Location::cereal_text() const {
  if (rep_ == nullptr) {
    static const std::string* const kDefault = new std::string(Location().to_string());
    return *kDefault;
  }
  const void* key = rep_;
  if (const std::string* text = rendered_locations.find(key)) return *text;
  return rendered_locations.put(key, to_string());
}

Location Location::from_cereal_text(std::string_view text) {
  if (const Location* location = parsed_locations.find(text)) return *location;
  absl::StatusOr<Location> parsed = parse(text);
  if (!parsed.ok()) throw cereal::Exception(std::string(parsed.status().message()));
  parsed_locations.put(text, *parsed);
  return *parsed;
}

}  // namespace postal::runtime
