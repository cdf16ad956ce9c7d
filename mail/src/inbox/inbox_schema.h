// inbox_schema.h — the inbox file's schema and its migrations (the mail store's scheme:
// `PRAGMA user_version`, one BEGIN IMMEDIATE transaction per step, newer files refused), plus
// `application_id` so that an inbox file and a mail store file are never confused.
#pragma once

#include <cstdint>

#include "../store/sqlite_db.h"
#include "absl/status/status.h"

namespace postal::mail::inbox {

inline constexpr int kInboxSchemaVersion = 1;
inline constexpr int64_t kApplicationId = 0x50494E42;  // "PINB"

// Brings `db` to kInboxSchemaVersion; refuses a file of another application or a newer schema.
absl::Status migrate_inbox(store::Db& db);

}  // namespace postal::mail::inbox
