#pragma once

// Latency summaries. Percentiles are nearest-rank over every sample (no
// histogram buckets): the tool keeps all samples, a few MB at most.

#include <cstddef>
#include <vector>

namespace waggle::bench {

struct latency_summary {
  size_t count = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;  // milliseconds
};

// Sorts `samples` in place.
latency_summary summarize_latency(std::vector<double>& samples);

// Nearest-rank percentile of sorted samples; q in [0, 1].
double percentile(const std::vector<double>& sorted, double q);

// Median of the values (the mean of the middle two for an even count); 0 if empty.
double median(std::vector<double> values);

}  // namespace waggle::bench
