// mem_mail_store.h — `MemMailStore`: a `MailStore` kept in memory.
//
// The whole contract of mail_store.h except that nothing outlives the object (`persistent()` is
// false): the store of the `mem` provider and of tests. Time (creation, TTL) is read from the
// injected clock.
#pragma once

#include <memory>

#include "postal/mail/clock.h"
#include "postal/mail/mail_store.h"

namespace postal::mail {

struct MemStoreOptions {
  std::shared_ptr<Clock> clock{};  // null: a SystemClock
  StoreLimits limits{};
};

class MemMailStore {
 public:
  static std::unique_ptr<MailStore> create(MemStoreOptions options = {});
};

}  // namespace postal::mail
