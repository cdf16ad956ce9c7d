// mq9_client: a NATS client written only against libnats (no postal headers), using postal's
// mailboxes through the mq9 subject protocol (docs/mq9.md). Run `postal mq9` first:
//
//   postal mq9 --listen 127.0.0.1:4222 &
//   mq9_client nats://127.0.0.1:4222
//
// It creates a private mailbox and a public one, posts to the private one at the three
// priorities (normal first), subscribes — a plain SUB, which replays what is stored — and checks
// that the messages come critical, urgent, normal; then it finds the public mailbox in the
// listing. Exit 0 when all of that held, 1 otherwise (what went wrong on stderr).
#include <nats/nats.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

// The value of "key":"..." in a flat JSON reply (enough for the replies used here).
std::string json_string(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\":\"";
  size_t at = json.find(needle);
  if (at == std::string::npos) return "";
  at += needle.size();
  return json.substr(at, json.find('"', at) - at);
}

std::string request(natsConnection* nc, const std::string& subject, const std::string& body) {
  natsMsg* reply = nullptr;
  natsStatus s = natsConnection_Request(&reply, nc, subject.c_str(), body.data(),
                                        static_cast<int>(body.size()), 5000);
  if (s != NATS_OK) {
    std::fprintf(stderr, "request %s: %s\n", subject.c_str(), natsStatus_GetText(s));
    return "";
  }
  std::string out(natsMsg_GetData(reply), natsMsg_GetDataLength(reply));
  natsMsg_Destroy(reply);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const char* url = argc > 1 ? argv[1] : NATS_DEFAULT_URL;
  natsConnection* nc = nullptr;
  if (natsStatus s = natsConnection_ConnectTo(&nc, url); s != NATS_OK) {
    std::fprintf(stderr, "cannot connect to %s: %s\n", url, natsStatus_GetText(s));
    return 1;
  }
  int failures = 0;

  // A private mailbox: the server draws its id.
  const std::string created = request(nc, "$mq9.AI.MAILBOX.CREATE", R"({"ttl":600,"public":false})");
  const std::string id = json_string(created, "mail_id");
  std::printf("created private mailbox %s\n", id.c_str());
  if (id.empty()) ++failures;

  const std::string base = "$mq9.AI.MAILBOX.MSG." + id;
  const std::vector<std::pair<std::string, std::string>> posts = {
      {base, "normal: task result"},
      {base + ".urgent", "urgent: interrupt the task"},
      {base + ".critical", "critical: abort"}};
  for (const auto& [subject, body] : posts) {
    const std::string r = request(nc, subject, body);  // {"msg_id":N} once stored
    std::printf("posted to %s: %s\n", subject.c_str(), r.c_str());
    if (r.find("msg_id") == std::string::npos) ++failures;
  }

  // A plain subscribe replays what the mailbox holds, in priority order.
  natsSubscription* sub = nullptr;
  natsConnection_SubscribeSync(&sub, nc, (base + ".*").c_str());
  const char* want[] = {"critical: abort", "urgent: interrupt the task", "normal: task result"};
  for (const char* expected : want) {
    natsMsg* m = nullptr;
    if (natsSubscription_NextMsg(&m, sub, 5000) != NATS_OK) {
      std::fprintf(stderr, "no replayed message where \"%s\" was expected\n", expected);
      ++failures;
      break;
    }
    const std::string body(natsMsg_GetData(m), natsMsg_GetDataLength(m));
    std::printf("received on %s: %s\n", natsMsg_GetSubject(m), body.c_str());
    if (body != expected) {
      std::fprintf(stderr, "out of order: got \"%s\", expected \"%s\"\n", body.c_str(), expected);
      ++failures;
    }
    natsMsg_Destroy(m);
  }
  natsSubscription_Destroy(sub);

  // A public mailbox is found in the listing; the private one is not.
  request(nc, "$mq9.AI.MAILBOX.CREATE", R"({"ttl":600,"public":true,"name":"demo.tasks"})");
  const std::string listing = request(nc, "$mq9.AI.PUBLIC.LIST", "");
  std::printf("public mailboxes: %s\n", listing.c_str());
  if (listing.find("\"demo.tasks\"") == std::string::npos) ++failures;
  if (!id.empty() && listing.find(id) != std::string::npos) ++failures;

  natsConnection_Destroy(nc);
  nats_Close();
  std::printf(failures == 0 ? "mq9_client: ok\n" : "mq9_client: %d check(s) failed\n", failures);
  return failures == 0 ? 0 : 1;
}
