// undeliverable: what happens to a message that cannot be delivered.
//
// A Courier sends to three destinations that cannot take its message. Each comes back to the
// Courier's Undeliverable port with a structured DeliveryFailure (R-FAIL-1), and the Courier's
// policy hooks decide what to do (R-FAIL-5): here it logs everything and keeps running, where the
// default policy would fail the actor on an invalid reference.
#include <iostream>

#include "postal/postal.h"

struct Parcel {
  std::string contents;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(contents);
  }
};
struct Deliver {
  postal::PortRef<Parcel> to;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(to);
  }
};
POSTAL_MESSAGE(Parcel, "examples.Parcel");
POSTAL_MESSAGE(Deliver, "examples.Deliver");

using postal::runtime::MessageEnvelope;

class Courier : public postal::Actor, public postal::Handles<Deliver> {
 public:
  explicit Courier(postal::PortRef<Parcel> log) : log_(log) {}

  absl::Status handle(postal::Context& cx, Deliver d) override {
    d.to.send(cx, Parcel{"a parcel for " + d.to.addr().to_string()});
    return absl::OkStatus();
  }

  // Default: fail the actor. Ours: note it and carry on.
  absl::Status on_invalid_reference(postal::Context& cx, const MessageEnvelope& env) override {
    return note(cx, env);
  }
  absl::Status on_port_gone(postal::Context& cx, const MessageEnvelope& env) override {
    return note(cx, env);
  }
  absl::Status on_transport_failure(postal::Context& cx, const MessageEnvelope& env) override {
    return note(cx, env);
  }

 private:
  absl::Status note(postal::Context& cx, const MessageEnvelope& env) {
    log_.send(cx, Parcel{"returned: " + env.root_failure()->to_string()});
    return absl::OkStatus();
  }
  postal::PortRef<Parcel> log_;
};

int main() {
  postal::Proc proc(postal::ProcOptions::threads(1));
  auto client = *postal::Client::attach(proc, "main");
  auto [log, log_rx] = postal::runtime::open_port<Parcel>(*client);
  auto courier = *postal::spawn<Courier>(proc, "courier", log.bind());

  using namespace postal::runtime;
  auto label = [](const char* s) { return Uid::singleton(*Label::parse(s)); };
  auto note_port = Port::handler(postal::wire::type_hash<Parcel>());

  // 1. An actor that never existed on this proc → InvalidReference(ActorNotExist).
  PortRef<Parcel> nobody(proc.actor_addr(label("nobody")).port(note_port));
  // 2. A port whose receiver was dropped → PortGone.
  PortRef<Parcel> dropped;
  {
    auto [handle, receiver] = open_port<Parcel>(*client);
    dropped = handle.bind();
  }
  // 3. Another proc, and this proc has no router → Transport(NoRoute).
  ActorAddr remote{ActorId{ProcId{Uid::instance(7)}, label("far")}, proc.location()};
  PortRef<Parcel> far(remote.port(note_port));

  for (const auto& to : {nobody, dropped, far}) courier.ref().send(*client, Deliver{to});
  for (int i = 0; i < 3; ++i) {
    auto line = log_rx.recv(absl::Seconds(5));
    if (!line.ok()) {
      std::cerr << line.status() << "\n";
      return 1;
    }
    std::cout << line->contents << "\n";
  }
  std::cout << "courier is " << courier.status().to_string() << "; proc stats: "
            << proc.stats().to_string() << "\n";
  return 0;
}
