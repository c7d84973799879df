#include "bench/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"

namespace dflash {

namespace {

constexpr double kWidth = 640, kHeight = 360;
constexpr double kLeft = 64, kRight = 150, kTop = 36, kBottom = 48;  // margins; the legend sits on the right
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// A round step giving about 5 ticks over [0, span].
double TickStep(double span) {
  if (!(span > 0)) return 1;
  const double raw = span / 5, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

struct Frame {
  double x0, x1, y0, y1;  // data ranges
  double X(double x) const { return kLeft + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (kWidth - kLeft - kRight); }
  double Y(double y) const { return kHeight - kBottom - (y1 > y0 ? (y - y0) / (y1 - y0) : 0) * (kHeight - kTop - kBottom); }
};

// Title, axes, y ticks and grid, axis labels and the legend.
void Axes(std::ostringstream& o, const ChartText& t, const Frame& f, const std::vector<ChartSeries>& series) {
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
    << "\" viewBox=\"0 0 " << kWidth << " " << kHeight << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << kWidth / 2 << "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">" << Escape(t.title) << "</text>\n";
  const double step = TickStep(f.y1 - f.y0);
  for (double y = std::ceil(f.y0 / step) * step; y <= f.y1 + 1e-9 * step; y += step) {
    o << "<line x1=\"" << kLeft << "\" x2=\"" << kWidth - kRight << "\" y1=\"" << Num(f.Y(y)) << "\" y2=\"" << Num(f.Y(y))
      << "\" stroke=\"#ddd\"/>\n<text x=\"" << kLeft - 6 << "\" y=\"" << Num(f.Y(y) + 4) << "\" text-anchor=\"end\">"
      << Num(y) << "</text>\n";
  }
  o << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft << "\" y1=\"" << kTop << "\" y2=\"" << kHeight - kBottom
    << "\" stroke=\"black\"/>\n<line x1=\"" << kLeft << "\" x2=\"" << kWidth - kRight << "\" y1=\"" << kHeight - kBottom
    << "\" y2=\"" << kHeight - kBottom << "\" stroke=\"black\"/>\n"
    << "<text x=\"" << (kLeft + kWidth - kRight) / 2 << "\" y=\"" << kHeight - 10 << "\" text-anchor=\"middle\">"
    << Escape(t.x_label) << "</text>\n"
    << "<text transform=\"translate(16 " << (kTop + kHeight - kBottom) / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
    << Escape(t.y_label) << "</text>\n";
  for (size_t s = 0; s < series.size(); ++s) {
    const double y = kTop + 8 + 18.0 * s;
    o << "<rect x=\"" << kWidth - kRight + 12 << "\" y=\"" << y - 8 << "\" width=\"12\" height=\"10\" fill=\""
      << kColors[s % 6] << "\"/>\n<text x=\"" << kWidth - kRight + 30 << "\" y=\"" << y + 1 << "\">"
      << Escape(series[s].name) << "</text>\n";
  }
}

Frame YRange(const std::vector<ChartSeries>& series) {
  Frame f{0, 1, 0, 0};
  for (const ChartSeries& s : series) {
    for (double v : s.values) {
      if (!std::isfinite(v)) Fail("chart: series '", s.name, "' has a value that is not finite");
      f.y0 = std::min(f.y0, v);
      f.y1 = std::max(f.y1, v);
    }
  }
  if (f.y1 <= f.y0) f.y1 = f.y0 + 1;
  f.y1 += 0.05 * (f.y1 - f.y0);
  return f;
}

}  // namespace

std::string SvgLineChart(const ChartText& text, const std::vector<double>& x, const std::vector<ChartSeries>& series) {
  if (x.empty()) Fail("chart '", text.title, "': no points");
  for (const ChartSeries& s : series) {
    if (s.values.size() != x.size()) Fail("chart '", text.title, "': series '", s.name, "' has ", s.values.size(), " values for ", x.size(), " x");
  }
  Frame f = YRange(series);
  f.x0 = *std::min_element(x.begin(), x.end());
  f.x1 = *std::max_element(x.begin(), x.end());
  std::ostringstream o;
  Axes(o, text, f, series);
  for (double v : x) {
    o << "<text x=\"" << Num(f.X(v)) << "\" y=\"" << kHeight - kBottom + 16 << "\" text-anchor=\"middle\">" << Num(v) << "</text>\n";
  }
  for (size_t s = 0; s < series.size(); ++s) {
    o << "<polyline fill=\"none\" stroke=\"" << kColors[s % 6] << "\" stroke-width=\"2\" points=\"";
    for (size_t i = 0; i < x.size(); ++i) o << (i ? " " : "") << Num(f.X(x[i])) << "," << Num(f.Y(series[s].values[i]));
    o << "\"/>\n";
    for (size_t i = 0; i < x.size(); ++i) {
      o << "<circle cx=\"" << Num(f.X(x[i])) << "\" cy=\"" << Num(f.Y(series[s].values[i])) << "\" r=\"3\" fill=\""
        << kColors[s % 6] << "\"/>\n";
    }
  }
  o << "</svg>\n";
  return o.str();
}

std::string SvgBarChart(const ChartText& text, const std::vector<std::string>& categories,
                        const std::vector<ChartSeries>& series) {
  if (categories.empty() || series.empty()) Fail("chart '", text.title, "': no bars");
  for (const ChartSeries& s : series) {
    if (s.values.size() != categories.size()) {
      Fail("chart '", text.title, "': series '", s.name, "' has ", s.values.size(), " values for ", categories.size(), " categories");
    }
  }
  const Frame f = YRange(series);
  std::ostringstream o;
  Axes(o, text, f, series);
  const double slot = (kWidth - kLeft - kRight) / categories.size(), bar = 0.8 * slot / series.size();
  for (size_t c = 0; c < categories.size(); ++c) {
    const double left = kLeft + c * slot + 0.1 * slot;
    o << "<text x=\"" << Num(left + 0.4 * slot) << "\" y=\"" << kHeight - kBottom + 16 << "\" text-anchor=\"middle\">"
      << Escape(categories[c]) << "</text>\n";
    for (size_t s = 0; s < series.size(); ++s) {
      const double v = series[s].values[c], top = f.Y(std::max(v, 0.0)), bottom = f.Y(std::min(v, 0.0));
      o << "<rect x=\"" << Num(left + s * bar) << "\" y=\"" << Num(top) << "\" width=\"" << Num(bar) << "\" height=\""
        << Num(bottom - top) << "\" fill=\"" << kColors[s % 6] << "\"><title>" << Escape(series[s].name) << " "
        << Escape(categories[c]) << ": " << Num(v) << "</title></rect>\n";
    }
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace dflash
