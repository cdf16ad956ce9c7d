// Inline SVG charts for the `postal bench` HTML report: no scripts, no external resources; every
// mark carries a <title> so the browser shows its value on hover.
//
//   BarChart    grouped bars: one group per category, one bar per series; linear or log y axis;
//               an optional dashed reference line (a target)
//   RangeChart  one row per item on a log time axis (microseconds): a bar from p50 to max with
//               markers at p50, p99, p99.9 and max
//
// Values <= 0 (or NaN) are "not measured": no bar, and the group keeps its slot.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace postal::tools::bench {

struct Series {
  std::string name;
  std::string color;           // a CSS colour
  std::vector<double> values;  // one per category
};

struct BarChart {
  std::string title;
  std::string y_label;
  std::vector<std::string> categories;
  std::vector<Series> series;
  bool log_y = false;
  std::optional<double> reference;  // a horizontal dashed line at this value
  std::string reference_label;
  std::function<std::string(double)> format;  // value labels; default: si()
  double clip =
      0;  // when > 0, the axis ends here; taller bars are cut (their label says the value)
  int width = 960;
  int height = 340;
};

struct RangeRow {
  std::string label;
  double p50 = 0, p99 = 0, p999 = 0, max = 0;  // microseconds
  bool peer = false;                           // drawn in the peer style
};

struct RangeChart {
  std::string title;
  std::vector<RangeRow> rows;
  int width = 960;
};

std::string render(const BarChart& chart);
std::string render(const RangeChart& chart);

// Text escaped for HTML/SVG content and attributes.
std::string escape(std::string_view text);

}  // namespace postal::tools::bench
