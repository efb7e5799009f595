#include "db/batch_bisect.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <pqxx/except>

// The failure policy around write_batch (docs/write-path.md): which errors are the
// event's own (bisect them away), which are transient (retry), and which mean
// the outcome is unknown (answer "failed", never OK).

namespace waggle::db {

namespace {

std::string sqlstate_class_reason(const std::string& state) {
  if (state.rfind("22", 0) == 0)
    return "the database cannot store this event: data exception (SQLSTATE class 22)";
  if (state.rfind("54", 0) == 0)
    return "the database cannot store this event: a value is too large to index (SQLSTATE "
           "class 54)";
  return "the database refused this event: integrity constraint violation (SQLSTATE class 23)";
}

// Errors that the same event would raise again, whatever else is in its
// batch: data exceptions (22), integrity violations (23) and program limits
// (54: e.g. a d tag too large for its btree index). Bisection isolates them
// so one bad event never fails its neighbours.
bool deterministic(const std::string& state) {
  return state.rfind("22", 0) == 0 || state.rfind("23", 0) == 0 || state.rfind("54", 0) == 0;
}

constexpr int max_retries = 3;

struct connection_lost {
  std::string what;
};

void fill(std::vector<write_result>& out, size_t lo, size_t hi, write_outcome o,
          const std::string& reason) {
  for (size_t i = lo; i < hi; ++i)
    out[i] = {o, reason};
}

// Runs items[lo, hi) as one transaction; bisects on deterministic errors.
// Throws connection_lost when the connection is gone (results of [lo, hi)
// are left `failed`).
void run_bisecting(pqxx::connection& conn, const std::vector<ingest_item>& items, size_t lo,
                   size_t hi, std::vector<write_result>& out, const write_options& opts) {
  if (lo >= hi)
    return;
  std::vector<ingest_item> sub(items.begin() + static_cast<std::ptrdiff_t>(lo),
                               items.begin() + static_cast<std::ptrdiff_t>(hi));
  for (int attempt = 0;; ++attempt) {
    std::string state;
    try {
      auto r = write_batch(conn, sub, opts);
      std::copy(r.begin(), r.end(), out.begin() + static_cast<std::ptrdiff_t>(lo));
      return;
    } catch (const pqxx::broken_connection& e) {
      throw connection_lost{e.what()};
    } catch (const pqxx::in_doubt_error& e) {
      // The COMMIT's outcome is unknown: answer `failed` (a resend is then a
      // harmless duplicate), never OK.
      throw connection_lost{e.what()};
    } catch (const pqxx::serialization_failure&) {
      state = "40001";
    } catch (const pqxx::deadlock_detected&) {
      state = "40P01";
    } catch (const pqxx::sql_error& e) {
      if (!conn.is_open())
        throw connection_lost{e.what()};
      state = e.sqlstate();
      if (state == "40001" || state == "40P01") {
        // (libpqxx maps these to the classes above; kept for safety.)
      } else if (deterministic(state)) {
        if (hi - lo == 1) {
          out[lo] = {write_outcome::rejected, sqlstate_class_reason(state)};
          return;
        }
        size_t mid = lo + (hi - lo) / 2;
        run_bisecting(conn, items, lo, mid, out, opts);
        run_bisecting(conn, items, mid, hi, out, opts);
        return;
      } else {
        fill(out, lo, hi, write_outcome::failed, "database error");
        return;
      }
    } catch (const std::exception& e) {
      if (!conn.is_open())
        throw connection_lost{e.what()};
      fill(out, lo, hi, write_outcome::failed, "internal error");
      return;
    }
    // 40001 / 40P01: the transaction was rolled back as a whole; run it again.
    if (attempt >= max_retries) {
      fill(out, lo, hi, write_outcome::failed, "database busy (serialization failure or deadlock)");
      return;
    }
  }
}

}  // namespace

std::vector<write_result> write_batch_bisecting(pqxx::connection& conn,
                                                const std::vector<ingest_item>& items,
                                                const write_options& opts) {
  std::vector<write_result> out(items.size(),
                                write_result{write_outcome::failed, "database unavailable"});
  try {
    run_bisecting(conn, items, 0, items.size(), out, opts);
  } catch (const connection_lost& lost) {
    // Whatever was not answered by a committed sub-batch stays `failed`.
    throw batch_unavailable(std::move(out), "database unavailable: " + lost.what);
  }
  return out;
}



}  // namespace waggle::db
