// hello: the program in README.md, kept compiling.
#include <iostream>

#include "postal/postal.h"

struct Greet {
  std::string name;
  template <class A>
  void serialize(A& a) {
    a(name);
  }
};
POSTAL_MESSAGE(Greet, "hello.Greet");

struct Greeter : postal::Actor, postal::Handles<Greet> {
  absl::Status handle(postal::Context& cx, Greet g) override {
    std::cout << "hello, " << g.name << "\n";
    cx.stop();
    return absl::OkStatus();
  }
};

int main() {
  postal::Proc proc;
  auto me = *postal::Client::attach(proc, "main");
  auto greeter = *postal::spawn<Greeter>(proc, "greeter");
  greeter.ref().send(*me, Greet{"world"});
  return greeter.wait(absl::Seconds(5)).ok() ? 0 : 1;
}
