// `postal nats-users TOPOLOGY --secret-fd N`: the nats-server `authorization` block of a topology
// (R-SEC-4, routing/nats_users.h), for the configuration of a NATS cluster the operator runs. The
// secret comes on an fd (as `postal proc --secret-fd`), never in argv; the block holds passwords
// derived from it, so it goes to stdout for a file the operator keeps private.
#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "commands.h"
#include "postal/routing/channel_key.h"
#include "postal/routing/nats_users.h"
#include "postal/routing/topology_spec.h"
#include "postal/runtime/logger.h"
#include "postal/wire/absl_compat.h"

namespace postal::tools {
namespace {

int fail(std::string_view what) {
  runtime::Logger::tools().error(absl::StrCat("postal nats-users: ", sv(what)));
  return 1;
}

}  // namespace

int nats_users_command(const std::string& file, int secret_fd) {
  if (secret_fd < 0) {
    const char* env = std::getenv("POSTAL_SECRET_FD");
    if (env == nullptr || !absl::SimpleAtoi(env, &secret_fd) || secret_fd < 0) {
      return fail(
          "needs the topology's secret on an fd: --secret-fd N (or POSTAL_SECRET_FD), e.g. "
          "postal nats-users shop.toml --secret-fd 3 3< /etc/postal/shop.secret");
    }
  }
  absl::StatusOr<routing::TopologySpec> spec = routing::load_topology(file);
  if (!spec.ok()) return fail(std::string(spec.status().message()));
  absl::StatusOr<std::string> secret = routing::ChannelKey::read_secret_fd(secret_fd);
  if (!secret.ok()) return fail(absl::StrCat("the secret: ", secret.status().message()));
  absl::StatusOr<std::shared_ptr<const routing::ChannelKey>> key =
      routing::ChannelKey::derive(*secret);
  routing::ChannelKey::wipe(*secret);
  if (!key.ok()) return fail(absl::StrCat("the secret: ", key.status().message()));
  const std::string block = routing::nats_authorization(*spec, **key);
  std::fwrite(block.data(), 1, block.size(), stdout);
  return 0;
}

}  // namespace postal::tools
