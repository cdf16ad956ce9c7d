#include "bench_svg.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench_report.h"
#include "postal/wire/absl_compat.h"

namespace postal::tools::bench {
namespace {

bool measured(double v) { return v > 0 && std::isfinite(v); }

std::string num(double v) { return absl::StrFormat("%.1f", v); }

// A y (or x) axis: maps values to [0, 1] linearly or by log10.
struct Axis {
  bool log = false;
  double lo = 0, hi = 1;
  double frac(double v) const {
    if (log) {
      v = std::max(v, lo);
      return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    }
    return (v - lo) / (hi - lo);
  }
  std::vector<double> ticks() const {
    std::vector<double> out;
    if (log) {
      for (double t = lo; t <= hi * 1.0001; t *= 10) out.push_back(t);
      return out;
    }
    const double raw = (hi - lo) / 5;
    const double mag = std::pow(10, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
      if (m * mag >= raw) {
        step = m * mag;
        break;
      }
    }
    for (double t = lo; t <= hi * 1.0001; t += step) out.push_back(t);
    return out;
  }
};

Axis make_axis(double vmin, double vmax, bool log) {
  Axis a;
  a.log = log;
  if (log) {
    a.lo = std::pow(10, std::floor(std::log10(vmin)));
    a.hi = std::pow(10, std::ceil(std::log10(vmax)));
    if (a.hi <= a.lo) a.hi = a.lo * 10;
  } else {
    a.lo = 0;
    a.hi = vmax * 1.08;
    const double mag = std::pow(10, std::floor(std::log10(a.hi)));
    a.hi = std::ceil(a.hi / (mag / 2)) * (mag / 2);
  }
  return a;
}

std::string text(double x, double y, std::string_view s, std::string_view attrs = "") {
  return absl::StrCat("<text x=\"", num(x), "\" y=\"", num(y), "\" ", sv(attrs), ">", escape(s),
                      "</text>");
}

// Legend entries flowing left to right from (x, y), wrapping at `width`; returns the height used.
int legend(std::string& out, const std::vector<std::pair<std::string, std::string>>& entries,
           int x0, int y, int width) {
  int x = x0, rows = 1;
  for (const auto& [name, color] : entries) {
    const int w = 22 + static_cast<int>(name.size()) * 7;
    if (x + w > width && x != x0) {
      x = x0;
      y += 18;
      ++rows;
    }
    absl::StrAppend(&out, "<rect x=\"", x, "\" y=\"", y - 10,
                    "\" width=\"12\" height=\"12\" fill=\"", color, "\"/>",
                    text(x + 16, y, name, "font-size=\"12\""));
    x += w;
  }
  return rows * 18;
}

// Axis ticks: "10 k", "1 M", "0.1 us", "10 ms".
std::string tick_si(double v) {
  if (v >= 1e9) return absl::StrFormat("%g G", v / 1e9);
  if (v >= 1e6) return absl::StrFormat("%g M", v / 1e6);
  if (v >= 1e3) return absl::StrFormat("%g k", v / 1e3);
  return absl::StrFormat("%g", v);
}

std::string tick_micros(double us) {
  if (us >= 1e6) return absl::StrFormat("%g s", us / 1e6);
  if (us >= 1e3) return absl::StrFormat("%g ms", us / 1e3);
  return absl::StrFormat("%g us", us);
}

}  // namespace

std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

// Where a bar chart's plot area is and how values map onto it.
struct BarFrame {
  int left = 84, right = 16, top = 96, cat_h = 22;
  int plot_w = 0, plot_h = 0;
  Axis axis;
  bool clipped = false;
  double y_of(double v) const { return top + plot_h - axis.frac(v) * plot_h; }
};

void draw_y_axis(std::string& out, const BarChart& c, const BarFrame& f) {
  for (double t : f.axis.ticks()) {
    const double y = f.y_of(t);
    absl::StrAppend(&out, "<line x1=\"", f.left, "\" x2=\"", f.left + f.plot_w, "\" y1=\"", num(y),
                    "\" y2=\"", num(y), "\" stroke=\"#e3e3e3\"/>",
                    text(f.left - 6, y + 4, c.format ? c.format(t) : tick_si(t),
                         "font-size=\"11\" text-anchor=\"end\" fill=\"#555\""));
  }
  const double mid = f.top + f.plot_h / 2.0;
  absl::StrAppend(&out, text(16, mid, c.y_label,
                             absl::StrCat("font-size=\"12\" text-anchor=\"middle\" "
                                          "transform=\"rotate(-90 16 ",
                                          num(mid), ")\"")));
}

// One group of bars per category, each labelled with its value (rotated, above the bar).
void draw_bars(std::string& out, const BarChart& c, const BarFrame& f,
               const std::function<std::string(double)>& format) {
  const double group_w = static_cast<double>(f.plot_w) / c.categories.size();
  const double inner = group_w * 0.84;
  const double bar_w = inner / std::max<size_t>(1, c.series.size());
  for (size_t g = 0; g < c.categories.size(); ++g) {
    const double gx = f.left + g * group_w;
    absl::StrAppend(&out, text(gx + group_w / 2, f.top + f.plot_h + 16, c.categories[g],
                               "font-size=\"12\" text-anchor=\"middle\""));
    for (size_t s = 0; s < c.series.size(); ++s) {
      const double v = g < c.series[s].values.size() ? c.series[s].values[g] : 0;
      if (!measured(v)) continue;
      const double x = gx + (group_w - inner) / 2 + s * bar_w;
      const bool cut = f.clipped && v > f.axis.hi;
      const double y = f.y_of(cut ? f.axis.hi : v);
      absl::StrAppend(
          &out, "<rect x=\"", num(x + 1), "\" y=\"", num(y), "\" width=\"",
          num(std::max(1.0, bar_w - 2)), "\" height=\"", num(f.top + f.plot_h - y), "\" fill=\"",
          c.series[s].color, "\"><title>",
          escape(absl::StrCat(c.series[s].name, ", ", c.categories[g], ": ", format(v))),
          "</title></rect>");
      if (cut) {  // a white zigzag across the top says the bar goes on
        absl::StrAppend(&out, "<path d=\"M", num(x + 1), " ", num(y + 8), " l",
                        num((bar_w - 2) / 2), " -5 l", num((bar_w - 2) / 2),
                        " 5\" stroke=\"#fff\" stroke-width=\"2\" "
                        "fill=\"none\"/>");
      }
      const double lx = x + bar_w / 2 + 3;
      absl::StrAppend(
          &out, text(lx, y - 4, format(v),
                     absl::StrCat("font-size=\"9\" fill=\"#333\" transform=\"rotate(-90 ", num(lx),
                                  " ", num(y - 4), ")\"")));
    }
  }
}

}  // namespace

std::string render(const BarChart& c) {
  const std::function<std::string(double)> format =
      c.format ? c.format : std::function<std::string(double)>([](double v) { return si(v); });
  double vmin = INFINITY, vmax = 0;
  for (const auto& s : c.series) {
    for (double v : s.values) {
      if (!measured(v)) continue;
      vmin = std::min(vmin, v);
      vmax = std::max(vmax, v);
    }
  }
  if (c.reference) vmax = std::max(vmax, *c.reference);
  BarFrame f;
  const int legend_rows = 1 + static_cast<int>(c.series.size()) / 6;
  f.plot_w = c.width - f.left - f.right;
  f.plot_h = c.height - f.top - (f.cat_h + 12 + legend_rows * 18);
  const std::string title = text(f.left, 22, c.title, "font-size=\"15\" font-weight=\"bold\"");
  if (vmax <= 0 || c.categories.empty()) {
    return absl::StrCat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", c.width,
                        "\" height=\"56\" font-family=\"sans-serif\">", title,
                        text(f.left, 46, "nothing of this kind was measured in this run",
                             "font-size=\"13\" fill=\"#777\""),
                        "</svg>");
  }
  f.clipped = c.clip > 0 && vmax > c.clip;
  f.axis = make_axis(c.log_y ? vmin : 0, f.clipped ? c.clip : vmax, c.log_y);
  std::string out = absl::StrCat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", c.width,
                                 "\" height=\"", c.height, "\" viewBox=\"0 0 ", c.width, " ",
                                 c.height, "\" font-family=\"sans-serif\">", title);
  draw_y_axis(out, c, f);
  draw_bars(out, c, f, format);
  const int base = f.top + f.plot_h;
  absl::StrAppend(&out, "<line x1=\"", f.left, "\" x2=\"", f.left + f.plot_w, "\" y1=\"", base,
                  "\" y2=\"", base, "\" stroke=\"#888\"/>");
  if (c.reference) {
    const double y = f.y_of(*c.reference);
    absl::StrAppend(&out, "<line x1=\"", f.left, "\" x2=\"", f.left + f.plot_w, "\" y1=\"", num(y),
                    "\" y2=\"", num(y), "\" stroke=\"#c0392b\" stroke-dasharray=\"6 4\"/>",
                    // The key sits under the title, clear of the bars.
                    "<line x1=\"", f.left, "\" x2=\"", f.left + 28,
                    "\" y1=\"40\" y2=\"40\" "
                    "stroke=\"#c0392b\" stroke-dasharray=\"6 4\"/>",
                    text(f.left + 34, 44, c.reference_label, "font-size=\"12\" fill=\"#c0392b\""));
  }
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& s : c.series) entries.emplace_back(s.name, s.color);
  legend(out, entries, f.left, base + f.cat_h + 16, c.width - f.right);
  absl::StrAppend(&out, "</svg>");
  return out;
}

std::string render(const RangeChart& c) {
  double vmin = INFINITY, vmax = 0;
  for (const auto& r : c.rows) {
    for (double v : {r.p50, r.p99, r.p999, r.max}) {
      if (!measured(v)) continue;
      vmin = std::min(vmin, v);
      vmax = std::max(vmax, v);
    }
  }
  const int label_w = 290, right = 48, top = 52, row_h = 18;
  const int plot_w = c.width - label_w - right;
  const int height = top + static_cast<int>(c.rows.size()) * row_h + 40;
  std::string out = absl::StrCat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", c.width,
                                 "\" height=\"", height, "\" viewBox=\"0 0 ", c.width, " ", height,
                                 "\" font-family=\"sans-serif\">",
                                 text(10, 22, c.title, "font-size=\"15\" font-weight=\"bold\""));
  if (vmax <= 0) {
    absl::StrAppend(&out,
                    text(10, top + 10, "nothing of this kind was measured in this run",
                         "font-size=\"13\" fill=\"#777\""),
                    "</svg>");
    return out;
  }
  const Axis axis = make_axis(vmin, vmax, true);
  auto x_of = [&](double v) { return label_w + axis.frac(v) * plot_w; };
  const int plot_bottom = top + static_cast<int>(c.rows.size()) * row_h;
  for (double t : axis.ticks()) {
    const double x = x_of(t);
    absl::StrAppend(
        &out, "<line x1=\"", num(x), "\" x2=\"", num(x), "\" y1=\"", top - 6, "\" y2=\"",
        plot_bottom, "\" stroke=\"#e3e3e3\"/>",
        text(x, top - 10, tick_micros(t), "font-size=\"11\" text-anchor=\"middle\" fill=\"#555\""));
  }
  const char* colors[] = {"#2471a3", "#e67e22", "#c0392b", "#555555"};
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const RangeRow& r = c.rows[i];
    const double y = top + i * row_h + row_h / 2.0;
    if (i % 2 == 0) {
      absl::StrAppend(&out, "<rect x=\"0\" y=\"", num(y - row_h / 2.0), "\" width=\"", c.width,
                      "\" height=\"", row_h, "\" fill=\"#f6f6f6\"/>");
    }
    absl::StrAppend(&out,
                    text(label_w - 8, y + 4, r.label,
                         absl::StrCat("font-size=\"11\" text-anchor=\"end\"",
                                      r.peer ? " font-style=\"italic\" fill=\"#6c3483\"" : "")));
    if (!measured(r.p50)) continue;
    const double x0 = x_of(r.p50), x1 = x_of(measured(r.max) ? r.max : r.p50);
    absl::StrAppend(&out, "<rect x=\"", num(x0), "\" y=\"", num(y - 2), "\" width=\"",
                    num(std::max(1.0, x1 - x0)), "\" height=\"4\" fill=\"",
                    r.peer ? "#d2b4de" : "#aed6f1", "\"/>");
    const double values[] = {r.p50, r.p99, r.p999, r.max};
    const char* names[] = {"p50", "p99", "p99.9", "max"};
    for (int k = 3; k >= 0; --k) {
      if (!measured(values[k])) continue;
      absl::StrAppend(&out, "<circle cx=\"", num(x_of(values[k])), "\" cy=\"", num(y), "\" r=\"",
                      k == 0 ? 5 : 4, "\" fill=\"", colors[k], "\"><title>",
                      escape(absl::StrCat(r.label, " ", names[k], ": ", micros(values[k]))),
                      "</title></circle>");
    }
  }
  std::vector<std::pair<std::string, std::string>> entries = {
      {"p50", colors[0]}, {"p99", colors[1]}, {"p99.9", colors[2]}, {"max", colors[3]}};
  legend(out, entries, label_w, plot_bottom + 24, c.width - right);
  absl::StrAppend(&out, "</svg>");
  return out;
}

}  // namespace postal::tools::bench
