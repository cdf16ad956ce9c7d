// A program built against an installed postal (`make check-install`): it includes the public
// headers through <postal/...>, spawns an actor and exchanges a message, so the check covers the
// installed headers, the exported targets and their dependencies.
#include <postal/postal.h>

struct Greet {
  std::string name;
  template <class A>
  void serialize(A& a) {
    a(name);
  }
};
POSTAL_MESSAGE(Greet, "install_check.Greet");

struct Greeter : postal::Actor, postal::Handles<Greet> {
  absl::Status handle(postal::Context& cx, Greet) override {
    cx.stop();
    return absl::OkStatus();
  }
};

int main() {
  postal::Proc proc;
  auto me = *postal::Client::attach(proc, "main");
  auto greeter = *postal::spawn<Greeter>(proc, "greeter");
  greeter.ref().send(*me, Greet{"installed"});
  auto status = greeter.wait(absl::Seconds(5));
  return status.ok() && status->state == postal::ActorState::kStopped ? 0 : 1;
}
