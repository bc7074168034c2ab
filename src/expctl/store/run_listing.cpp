// The one run listing of both backends (run_listing.hpp).
#include "expctl/store/run_listing.hpp"

#include <fmt/format.h>

#include "expctl/util/process_identity.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::store::detail {

namespace {

constexpr int k_owner_column = 10;  ///< owner_host in k_listing_columns
constexpr int k_heartbeat_column = k_owner_column + 4;
constexpr int k_tags_column = k_owner_column + 5;
constexpr int k_shipped_column = k_owner_column + 6;  ///< a server's listing only

}  // namespace

ListingSql listing_sql(const RunQuery& query, const ListingDialect& dialect) {
  std::vector<ListingParam> params;
  const auto next = [&](std::string value, bool integer = false) {
    params.push_back(ListingParam{std::move(value), integer});
    return dialect.placeholder(params.size());
  };
  std::string where = " WHERE 1 = 1";
  if (query.status) {
    where += " AND status = " + next(std::string(to_string(*query.status)));
  }
  if (query.tag) {
    where += " AND id IN (SELECT run_id FROM tags WHERE tag = " + next(*query.tag) + ")";
  }
  if (!query.name_contains.empty()) {
    where += " AND " + fmt::format(fmt::runtime(dialect.name_contains), next(query.name_contains));
  }
  if (!query.spec_hash_prefix.empty()) {
    where += " AND " + fmt::format(fmt::runtime(dialect.spec_hash_starts_with), next(query.spec_hash_prefix));
  }
  ListingSql sql;
  sql.count = "SELECT count(*) FROM runs" + where;
  sql.count_params = params;
  const char* direction = query.descending ? "DESC" : "ASC";
  std::string order;
  switch (query.sort) {
    case RunSort::started:
      order = fmt::format("started_at {0}, {1} {0}", direction, dialect.creation_order);
      break;
    case RunSort::name:  // byte order, as std::string's (not the database's locale)
      order = fmt::format("name{1} {0}, id {0}", direction, dialect.byte_order);
      break;
    case RunSort::status:
      order = fmt::format("status{1} {0}, id {0}", direction, dialect.byte_order);
      break;
    case RunSort::duration: {
      // From start to end (or to now); a time that cannot be read is NULL and sorts as the smallest.
      const std::string now = next(format_utc(Clock::now()));
      order = fmt::format("{} {}{}, id {}", fmt::format(fmt::runtime(dialect.duration), now), direction,
                          !dialect.nulls_clause ? ""
                          : query.descending    ? " NULLS LAST"
                                                : " NULLS FIRST",
                          direction);
      break;
    }
  }
  sql.page = fmt::format("SELECT {} FROM {}{} ORDER BY {}", dialect.columns, dialect.from, where, order);
  if (query.limit > 0) {
    sql.page += " LIMIT " + next(std::to_string(query.limit), true);
  } else if (*dialect.no_limit != '\0') {
    sql.page += std::string(" LIMIT ") + dialect.no_limit;
  }
  sql.page += " OFFSET " + next(std::to_string(query.offset), true);
  sql.page_params = std::move(params);
  return sql;
}

RunRecord decode_run_row(const ListingRow& row, bool shipped_columns) {
  const auto optional_text = [&row](int column) {
    return row.is_null(column) ? std::nullopt : std::optional(row.text(column));
  };
  RunRecord run;
  run.id = row.text(0);
  run.spec_hash = row.text(1);
  run.environment_hash = optional_text(2);
  run.name = row.text(3);
  run.status = parse_run_status(row.text(4)).value_or(RunStatus::failed);  // the CHECK constraint admits no other
  run.started_at = row.text(5);
  run.ended_at = optional_text(6);
  run.exit_code = row.is_null(7) ? std::nullopt : std::optional(static_cast<int>(row.int64(7)));
  run.root_cause = row.text(8);
  run.summary_json = row.text(9);
  std::optional<util::ProcessIdentity> owner;
  if (!row.is_null(k_owner_column)) {  // null: a row from before the owner columns (SQLite schema v3)
    owner = util::ProcessIdentity{row.text(k_owner_column), row.int64(k_owner_column + 1), row.text(k_owner_column + 2),
                                  row.int64(k_owner_column + 3)};
    run.owner = owner->display();
  }
  run.heartbeat_at = optional_text(k_heartbeat_column);
  if (const auto tags = optional_text(k_tags_column)) {
    run.tags = util::split(*tags, ',');
  }
  if (shipped_columns && row.text(k_shipped_column) == "t") {
    // A node ships its runs: one still `running` here is running, or not shipped since (show says
    // when and from where), unless the node found its expctl gone and said so. The server never
    // guesses `lost` from an owner it cannot see or a heartbeat that simply has not arrived.
    if (run.status == RunStatus::running && row.text(k_shipped_column + 1) == "t") {
      run.status = RunStatus::lost;
    }
    return run;
  }
  const auto heartbeat = run.heartbeat_at ? parse_utc(*run.heartbeat_at) : std::nullopt;
  run.status = derive_run_status(run.status, owner, heartbeat, Clock::now());
  return run;
}

}  // namespace expctl::store::detail
