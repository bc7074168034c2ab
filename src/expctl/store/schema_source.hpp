#pragma once
/// Internal to the store module: the one source of the store's schema. Both backends' tables,
/// columns, keys, references, checks and indexes are described once (schema_source.cpp) and
/// rendered per SQL dialect. A new database of either backend is created from this text; the
/// migrations (schema.cpp, pg_schema.cpp) only carry older databases forward, and a test
/// (tests/unit/store/test_schema_source.cpp) holds every migrated database to the same shape.

#include <string>

namespace expctl::store::detail {

enum class Dialect { sqlite, postgres };

/// The CREATE statements of the latest schema in `dialect`, every table and index, in an order
/// that satisfies the references.
std::string create_schema_sql(Dialect dialect);

}  // namespace expctl::store::detail
