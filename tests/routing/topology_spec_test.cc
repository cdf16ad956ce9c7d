// TopologySpec: parsing topology files into specs, with errors an operator can act on.
#include "postal/routing/topology_spec.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace postal::routing {
namespace {

using runtime::ChannelAddr;

// Whether `status`'s message contains `word`; on failure, shows the message.
::testing::AssertionResult MessageHas(const absl::Status& status, std::string_view word) {
  const std::string_view message(status.message().data(), status.message().size());
  if (message.find(word) != std::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << word << "\"";
}

ChannelAddr addr(const char* text) { return *ChannelAddr::parse(text); }

constexpr char kFull[] = R"(# A full topology: every key used once.
[topology]
name = "demo"
on_proc_exit = "ignore"
ready_timeout = "500ms"
delivery_timeout = "2s"

[[gateway]]
name = "edge"
listen = "ipc:///tmp/postal-demo/edge.sock"
peers = ["core"]

[[gateway]]
name = "core"
listen = "tcp://127.0.0.1:0"

[[proc]]
name = "alpha"
listen = "tcp://127.0.0.1:0"
gateway = "edge"
workers = 2
binary = "./my_actors"
args = ["--flag", "-v"]

[[proc]]
name = "beta"
listen = "ipc://@beta"

[[actor]]
proc = "alpha"
name = "pinger"
type = "demo.Pinger"
params = { count = 1000, target = "beta/ponger", verbose = true, ratio = 0.5 }

[[actor]]
proc = "beta"
name = "ponger"
type = "demo.Ponger"

[workload]
pattern = "ping-pong"
from = "alpha/pinger"
to = "beta/ponger"
messages = 100000
size = 64
)";

TEST(TopologySpec, FullFileParsesIntoTheExpectedSpec) {
  absl::StatusOr<TopologySpec> spec = parse_topology(kFull, "demo.toml");
  ASSERT_TRUE(spec.ok()) << spec.status();

  TopologySpec want;
  want.name = "demo";
  want.on_proc_exit = OnProcExit::kIgnore;
  want.ready_timeout = absl::Milliseconds(500);
  want.delivery_timeout = absl::Seconds(2);
  want.gateways = {{"edge", addr("ipc:///tmp/postal-demo/edge.sock"), {"core"}},
                   {"core", addr("tcp://127.0.0.1:0"), {}}};
  ProcSpec alpha;
  alpha.name = "alpha";
  alpha.listen = addr("tcp://127.0.0.1:0");
  alpha.gateway = "edge";
  alpha.workers = 2;
  alpha.binary = "./my_actors";
  alpha.args = {"--flag", "-v"};
  ProcSpec beta;
  beta.name = "beta";
  beta.listen = addr("ipc://@beta");
  want.procs = {alpha, beta};
  ActorSpec pinger;
  pinger.proc = "alpha";
  pinger.name = "pinger";
  pinger.type = "demo.Pinger";
  pinger.params = {{"count", std::int64_t{1000}},
                   {"target", std::string("beta/ponger")},
                   {"verbose", true},
                   {"ratio", 0.5}};
  ActorSpec ponger;
  ponger.proc = "beta";
  ponger.name = "ponger";
  ponger.type = "demo.Ponger";
  want.actors = {pinger, ponger};
  want.workload =
      WorkloadSpec{WorkloadPattern::kPingPong, {"alpha", "pinger"}, {"beta", "ponger"}, 100000, 64};

  EXPECT_EQ(spec->name, want.name);
  EXPECT_EQ(spec->gateways, want.gateways);
  EXPECT_EQ(spec->procs, want.procs);
  EXPECT_EQ(spec->actors, want.actors);
  EXPECT_EQ(spec->workload, want.workload);
  EXPECT_EQ(*spec, want);  // Everything, including on_proc_exit and ready_timeout.
  EXPECT_EQ(spec->find_proc("beta"), &spec->procs[1]);
  EXPECT_EQ(spec->find_gateway("nope"), nullptr);
  EXPECT_EQ(spec->find_actor({"beta", "ponger"}), &spec->actors[1]);
}

TEST(TopologySpec, OmittedOptionalKeysTakeTheirDefaults) {
  absl::StatusOr<TopologySpec> spec = parse_topology(R"([topology]
name = "t"
[[proc]]
name = "a"
listen = "tcp://127.0.0.1:0"
[[proc]]
name = "b"
listen = "tcp://127.0.0.1:0"   # port 0 twice is fine: the OS picks.
)",
                                                     "t.toml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->on_proc_exit, OnProcExit::kTeardown);
  EXPECT_FALSE(spec->ready_timeout.has_value());
  EXPECT_TRUE(spec->gateways.empty());
  EXPECT_TRUE(spec->actors.empty());
  EXPECT_FALSE(spec->workload.has_value());
  ASSERT_EQ(spec->procs.size(), 2u);
  EXPECT_FALSE(spec->procs[0].gateway.has_value());
  EXPECT_FALSE(spec->procs[0].workers.has_value());
  EXPECT_FALSE(spec->procs[0].binary.has_value());
}

// A malformed file, the position its error must name, and words the message must contain
// (the key and the hint).
struct BadFile {
  const char* what;
  std::string toml;
  const char* position;
  std::vector<const char*> words;
};

// Lines 1-2 of most cases; their own lines start at 3.
const std::string kHead = "[topology]\nname = \"t\"\n";
const std::string kProcA = "[[proc]]\nname = \"a\"\nlisten = \"tcp://127.0.0.1:0\"\n";

std::vector<BadFile> bad_files() {
  return {
      {"TOML syntax error",
       kHead + "[[proc]]\nname = \"a\nlisten = 1\n",
       "t.toml:4:",
       {"not valid TOML", "fix the syntax"}},
      {"unknown top-level table",
       "[topolgy]\nname = \"t\"\n",
       "t.toml:1:2:",
       {"unknown table \"topolgy\"", "did you mean \"topology\"", "[[proc]]"}},
      {"top-level key outside a table",
       "name = \"t\"\n",
       "t.toml:1:1:",
       {"unknown top-level key \"name\"", "keys go inside one of them"}},
      {"missing [topology]", kProcA, "t.toml:1:1:", {"missing the [topology] table", "name = "}},
      {"topology name not a label",
       "[topology]\nname = \"Demo\"\n" + kProcA,
       "t.toml:2:8:",
       {"[topology]: name \"Demo\" is not a label", "lowercase", "\"demo\""}},
      {"unknown key in [topology]",
       kHead + "ready-timeout = \"1s\"\n" + kProcA,
       "t.toml:3:1:",
       {"unknown key \"ready-timeout\"", "did you mean \"ready_timeout\"", "on_proc_exit"}},
      {"bad on_proc_exit",
       kHead + "on_proc_exit = \"restart\"\n" + kProcA,
       "t.toml:3:16:",
       {"on_proc_exit \"restart\"", "\"teardown\"", "\"ignore\""}},
      {"bad ready_timeout",
       kHead + "ready_timeout = \"10\"\n" + kProcA,
       "t.toml:3:17:",
       {"ready_timeout \"10\" is not a duration", "\"500ms\"", "\"10s\""}},
      {"delivery_timeout below its floor",
       kHead + "delivery_timeout = \"10ms\"\n" + kProcA,
       "t.toml:3:20:",
       {"delivery_timeout \"10ms\" is not a duration from 100ms to 1h", "\"2s\""}},
      {"no proc", kHead, "t.toml:1:1:", {"no [[proc]] declared", "add at least one"}},
      {"typo in a proc key",
       kHead + kProcA + "worker = 2\n",
       "t.toml:6:1:",
       {"proc \"a\": unknown key \"worker\"", "did you mean \"workers\"", "binary"}},
      {"missing proc listen",
       kHead + "[[proc]]\nname = \"a\"\n",
       "t.toml:3:1:",
       {"proc \"a\": missing required key \"listen\"", "listen = \"tcp://127.0.0.1:0\""}},
      {"missing proc name",
       kHead + "[[proc]]\nlisten = \"tcp://127.0.0.1:0\"\n",
       "t.toml:3:1:",
       {"[[proc]] #1: missing required key \"name\"", "name = \"alpha\""}},
      {"proc listen not an address",
       kHead + "[[proc]]\nname = \"alpha\"\nlisten = \"tcp://x\"\n",
       "t.toml:5:10:",
       {"proc \"alpha\": listen \"tcp://x\" is not a channel address", "port",
        "\"tcp://127.0.0.1:0\"", "\"ipc://@name\""}},
      {"workers of the wrong type",
       kHead + kProcA + "workers = \"2\"\n",
       "t.toml:6:11:",
       {"workers must be an integer, not a string", "workers = 2"}},
      {"workers out of range",
       kHead + kProcA + "workers = 0\n",
       "t.toml:6:11:",
       {"workers = 0 is out of range", "from 1 to 256"}},
      {"args without a binary",
       kHead + kProcA + "args = [\"-v\"]\n",
       "t.toml:6:8:",
       {"args", "binary = \"./my_actors\""}},
      {"duplicate proc name",
       kHead + kProcA + kProcA,
       "t.toml:7:8:",
       {"proc \"a\": name \"a\" is declared twice (first at line 4)", "unique name"}},
      {"two procs on one address",
       kHead + "[[proc]]\nname = \"a\"\nlisten = \"tcp://127.0.0.1:4000\"\n"
               "[[proc]]\nname = \"b\"\nlisten = \"tcp://127.0.0.1:4000\"\n",
       "t.toml:8:10:",
       {"proc \"b\": listen", "already taken by proc \"a\"", "tcp port 0"}},
      {"wildcard bind clashes with a host on the same port",
       kHead + "[[gateway]]\nname = \"g\"\nlisten = \"tcp://0.0.0.0:4000\"\n"
               "[[proc]]\nname = \"b\"\nlisten = \"tcp://127.0.0.1:4000\"\n",
       "t.toml:8:10:",
       {"already taken by gateway \"g\""}},
      {"gateway and proc on one ipc path",
       kHead + "[[gateway]]\nname = \"g\"\nlisten = \"ipc:///tmp/x.sock\"\n"
               "[[proc]]\nname = \"b\"\nlisten = \"ipc:///tmp/x.sock\"\n",
       "t.toml:8:10:",
       {"already taken by gateway \"g\"", "its own address"}},
      {"[gateway] with single brackets",
       kHead + "[gateway]\nname = \"g\"\nlisten = \"ipc://@g\"\n" + kProcA,
       "t.toml:3:1:",
       {"gateway must be an array of tables", "[[gateway]]"}},
      {"gateway peering itself",
       kHead + "[[gateway]]\nname = \"g\"\nlisten = \"ipc://@g\"\npeers = [\"g\"]\n" + kProcA,
       "t.toml:6:10:",
       {"gateway \"g\": a gateway cannot peer itself", "other gateways"}},
      {"gateway peer undeclared",
       kHead +
           "[[gateway]]\nname = \"g\"\nlisten = \"ipc://@g\"\npeers = [\"cor\"]\n"
           "[[gateway]]\nname = \"core\"\nlisten = \"ipc://@core\"\n" +
           kProcA,
       "t.toml:6:10:",
       {"peer \"cor\" is not a declared gateway", "did you mean \"core\"", "[[gateway]]"}},
      {"proc behind an undeclared gateway",
       kHead + kProcA + "gateway = \"edge\"\n",
       "t.toml:6:11:",
       {"proc \"a\": gateway \"edge\" is not a declared gateway", "[[gateway]] (none is declared yet)"}},
      {"actor on an undeclared proc",
       kHead + kProcA + "[[actor]]\nproc = \"b\"\nname = \"x\"\ntype = \"T\"\n",
       "t.toml:7:8:",
       {"proc \"b\" is not a declared proc", "one of: \"a\""}},
      {"duplicate actor in one proc",
       kHead + kProcA + "[[actor]]\nproc = \"a\"\nname = \"x\"\ntype = \"T\"\n" +
           "[[actor]]\nproc = \"a\"\nname = \"x\"\ntype = \"T\"\n",
       "t.toml:12:8:",
       {"actor \"a/x\": name \"x\" is declared twice in proc \"a\"", "unique name"}},
      {"actor type with a space",
       kHead + kProcA + "[[actor]]\nproc = \"a\"\nname = \"x\"\ntype = \"demo Pinger\"\n",
       "t.toml:9:8:",
       {"type \"demo Pinger\" is not an actor type name", "\"demo.Pinger\""}},
      {"nested params",
       kHead + kProcA +
           "[[actor]]\nproc = \"a\"\nname = \"x\"\ntype = \"T\"\nparams = { a = { b = 1 } }\n",
       "t.toml:10:",
       {"params.a is a table", "flat table"}},
      {"workload endpoint names no actor",
       kHead + kProcA + "[[actor]]\nproc = \"a\"\nname = \"pinger\"\ntype = \"T\"\n" +
           "[workload]\npattern = \"stream\"\nfrom = \"a/pinger\"\nto = \"a/pnger\"\n"
           "messages = 1\nsize = 1\n",
       "t.toml:13:6:",
       {"to \"a/pnger\" is not a declared actor", "[[actor]]", "\"a/pinger\""}},
      {"unknown workload pattern",
       kHead + kProcA + "[workload]\npattern = \"broadcast\"\n",
       "t.toml:7:11:",
       {"pattern \"broadcast\"", "\"ping-pong\"", "\"fan-in\""}},
      {"workload size too large",
       kHead + kProcA + "[[actor]]\nproc = \"a\"\nname = \"x\"\ntype = \"T\"\n" +
           "[[actor]]\nproc = \"a\"\nname = \"y\"\ntype = \"T\"\n" +
           "[workload]\npattern = \"stream\"\nfrom = \"a/x\"\nto = \"a/y\"\nmessages = 1\n"
           "size = 67108865\n",
       "t.toml:19:8:",
       {"size = 67108865 is out of range", "from 1 to 67108864"}},
  };
}

TEST(TopologySpec, MalformedFilesNameLineKeyAndHint) {
  const std::vector<BadFile> cases = bad_files();
  ASSERT_GE(cases.size(), 15u);
  for (const BadFile& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<TopologySpec> spec = parse_topology(c.toml, "t.toml");
    ASSERT_FALSE(spec.ok()) << c.toml;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(spec.status().message());
    EXPECT_EQ(message.rfind(c.position, 0), 0u) << message;
    for (const char* word : c.words) EXPECT_TRUE(MessageHas(spec.status(), word)) << c.toml;
  }
}

TEST(TopologySpec, TextOverOneMebibyteIsRefusedBeforeParsing) {
  const std::string text = std::string(kFull) + std::string(kMaxTopologyFileBytes, '#');
  absl::StatusOr<TopologySpec> spec = parse_topology(text, "big.toml");
  ASSERT_FALSE(spec.ok());
  EXPECT_TRUE(MessageHas(spec.status(), "more than the limit"));
}

TEST(TopologySpec, ExampleFilesParse) {
  const std::filesystem::path dir =
      std::filesystem::path(POSTAL_SOURCE_DIR) / "examples/topologies";
  for (const char* name : {"three-procs.toml", "two-gateways.toml"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<TopologySpec> spec = load_topology((dir / name).string());
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_TRUE(spec->workload.has_value());
  }
}

// A scratch directory removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = ::testing::TempDir() + "topology_spec_XXXXXX";
    path_ = ::mkdtemp(pattern.data());
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  std::string file(const char* name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(TopologySpec, LoadReadsARegularFile) {
  ScratchDir dir;
  write_file(dir.file("demo.toml"), kFull);
  absl::StatusOr<TopologySpec> spec = load_topology(dir.file("demo.toml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "demo");
}

// A topology file with four procs whose binaries are: relative with a directory part, relative
// with "./", absolute, and a bare name.
std::string binaries_file() {
  std::string text = kHead;
  const char* binaries[] = {"bin/my_actors", "./my_actors", "/opt/postal/my_actors", "my_actors"};
  for (int i = 0; i < 4; ++i) {
    absl::StrAppend(&text, "[[proc]]\nname = \"p", i, "\"\nlisten = \"tcp://127.0.0.1:0\"\n",
                    "binary = \"", binaries[i], "\"\n");
  }
  return text;
}

// A relative binary path names a file next to the topology file, wherever `postal up` runs.
TEST(TopologySpec, LoadResolvesARelativeBinaryAgainstTheFilesDirectory) {
  ScratchDir dir;
  write_file(dir.file("demo.toml"), binaries_file());
  absl::StatusOr<TopologySpec> spec = load_topology(dir.file("demo.toml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->procs.size(), 4u);
  EXPECT_EQ(spec->procs[0].binary, dir.file("bin/my_actors"));
  EXPECT_EQ(spec->procs[1].binary, dir.file("./my_actors"));
  EXPECT_EQ(spec->procs[2].binary, "/opt/postal/my_actors") << "an absolute path is kept";
  EXPECT_EQ(spec->procs[3].binary, "my_actors") << "a bare name is left to the PATH lookup";
}

// Text parsed without a file has no directory to resolve against: binaries stay as written.
TEST(TopologySpec, ParseKeepsBinariesAsWritten) {
  absl::StatusOr<TopologySpec> spec = parse_topology(binaries_file(), "t.toml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->procs.size(), 4u);
  EXPECT_EQ(spec->procs[0].binary, "bin/my_actors");
  EXPECT_EQ(spec->procs[1].binary, "./my_actors");
  EXPECT_EQ(spec->procs[2].binary, "/opt/postal/my_actors");
  EXPECT_EQ(spec->procs[3].binary, "my_actors");
}

// `log` (topology-wide, or per proc) is handed to launched procs as --log-level; a spec that does
// not parse fails at load, naming the line, not later in a child.
TEST(TopologySpec, LogLevelsAreCheckedAtLoad) {
  absl::StatusOr<TopologySpec> spec = parse_topology(R"([topology]
name = "t"
log = "warn,postal.routing=debug"
[[proc]]
name = "a"
listen = "ipc://@t-a"
log = "debug"
[[proc]]
name = "b"
listen = "ipc://@t-b"
)",
                                                      "t.toml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->log, "warn,postal.routing=debug");
  EXPECT_EQ(spec->procs[0].log, "debug");
  EXPECT_EQ(spec->procs[1].log, std::nullopt);

  absl::StatusOr<TopologySpec> bad = parse_topology(R"([topology]
name = "t"
[[proc]]
name = "a"
listen = "ipc://@t-a"
log = "postal.routing=loud"
)",
                                                     "t.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(MessageHas(bad.status(), "t.toml:6")) << bad.status();
  EXPECT_TRUE(MessageHas(bad.status(), "loud"));
}

TEST(TopologySpec, LoadErrorsNameThePath) {
  ScratchDir dir;
  write_file(dir.file("bad.toml"), kHead + kProcA + "worker = 2\n");
  absl::StatusOr<TopologySpec> spec = load_topology(dir.file("bad.toml"));
  ASSERT_FALSE(spec.ok());
  EXPECT_TRUE(MessageHas(spec.status(), dir.file("bad.toml") + ":6:1:"));

  spec = load_topology(dir.file("missing.toml"));
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(MessageHas(spec.status(), "missing.toml"));
}

TEST(TopologySpec, LoadRefusesASymlink) {
  ScratchDir dir;
  write_file(dir.file("real.toml"), kFull);
  ASSERT_EQ(::symlink(dir.file("real.toml").c_str(), dir.file("link.toml").c_str()), 0);
  absl::StatusOr<TopologySpec> spec = load_topology(dir.file("link.toml"));
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(spec.status(), "link.toml: is a symbolic link"));
}

TEST(TopologySpec, LoadRefusesAFifoWithoutBlocking) {
  ScratchDir dir;
  const std::string fifo = dir.file("fifo.toml");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // No writer ever opens the FIFO: a blocking open would hang here.
  std::future<absl::StatusOr<TopologySpec>> result =
      std::async(std::launch::async, [&] { return load_topology(fifo); });
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "load_topology blocked on a FIFO";
    // Unblock it so the test can end: a writer lets the open return and the read see EOF.
    const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (writer >= 0) ::close(writer);
  }
  absl::StatusOr<TopologySpec> spec = result.get();
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(spec.status(), "fifo.toml: is a FIFO"));
}

TEST(TopologySpec, LoadRefusesADirectory) {
  ScratchDir dir;
  absl::StatusOr<TopologySpec> spec = load_topology(dir.file(""));
  ASSERT_FALSE(spec.ok());
  EXPECT_TRUE(MessageHas(spec.status(), "is a directory"));
}

TEST(TopologySpec, LoadRefusesAFileOverOneMebibyte) {
  ScratchDir dir;
  write_file(dir.file("big.toml"), std::string(kFull) + std::string(kMaxTopologyFileBytes, '#'));
  absl::StatusOr<TopologySpec> spec = load_topology(dir.file("big.toml"));
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(spec.status(), "big.toml: is larger than 1048576 bytes (1 MiB)"));
}

}  // namespace
}  // namespace postal::routing
