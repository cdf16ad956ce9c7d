// sqlite_schema.h — the SQLite store's schema and its migrations.
//
// The version is `PRAGMA user_version`. Migration n takes a store from version n to n+1, each in
// its own `BEGIN IMMEDIATE` transaction that also sets the new version, so a store is always at
// one version. A store above `kSchemaVersion` was written by a newer postal and is refused.
#pragma once

#include "absl/status/status.h"
#include "sqlite_db.h"

namespace postal::mail::store {

inline constexpr int kSchemaVersion = 2;

// Brings `db` to kSchemaVersion.
absl::Status migrate(Db& db);

}  // namespace postal::mail::store
