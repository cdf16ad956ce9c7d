#include "nats_permissions.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nats_conn.h"
#include "postal/routing/nats_users.h"
#include "postal/runtime/ids.h"

namespace postal::routing::internal {
namespace {

// A quoted string of the configuration file (names and subjects hold no quote or backslash, but
// the file must not depend on that).
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

std::string list(const std::vector<std::string>& items) {
  std::vector<std::string> q;
  q.reserve(items.size());
  for (const std::string& i : items) q.push_back(quoted(i));
  return absl::StrCat("[", absl::StrJoin(q, ", "), "]");
}

std::string user(const routing::ChannelKey& key, std::string_view name,
                 const std::vector<std::string>& publish, std::vector<std::string> subscribe) {
  const NatsCredentials c = nats_credentials(&key, name);
  subscribe.push_back(absl::StrCat(c.inbox_prefix, ".>"));
  return absl::StrCat("    {user: ", quoted(c.user), ", password: ", quoted(c.password),
                      ", permissions: {publish: {allow: ", list(publish),
                      "}, subscribe: {allow: ", list(subscribe), "}}}\n");
}

}  // namespace

std::string nats_authorization(const routing::ChannelKey& key,
                               const std::vector<NatsMember>& members) {
  std::vector<std::string> publish;
  for (const NatsMember& m : members) publish.push_back(absl::StrCat(m.subject, ".t.*"));
  publish.push_back("_INBOX.>");
  std::string text = "authorization {\n  users = [\n";
  absl::StrAppend(&text, user(key, kNatsDialOnlyUser, publish, {}));
  for (const NatsMember& m : members) {
    absl::StrAppend(&text, user(key, m.name, publish, {absl::StrCat(m.subject, ".t.*")}));
  }
  absl::StrAppend(&text, "  ]\n}\n");
  return text;
}

}  // namespace postal::routing::internal

namespace postal::routing {

std::string nats_authorization(const TopologySpec& spec, const ChannelKey& key) {
  std::vector<internal::NatsMember> members;
  auto add = [&](const std::string& name, const runtime::ChannelAddr& listen) {
    if (listen.transport() != runtime::ChannelAddr::Transport::kNats) return;
    // The name a Node logs in as: its proc id (ChannelOptions::nats_member), a singleton uid.
    members.push_back(
        {runtime::ProcId{runtime::Uid::singleton(*runtime::Label::parse(name))}.to_string(),
         std::string(listen.subject())});
  };
  for (const ProcSpec& p : spec.procs) add(p.name, p.listen);
  for (const GatewaySpec& g : spec.gateways) add(g.name, g.listen);
  return internal::nats_authorization(key, members);
}

}  // namespace postal::routing
