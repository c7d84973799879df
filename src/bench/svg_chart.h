// Small self-contained SVG charts for `dflash bench --report`: lines over a numeric x axis and
// grouped bars over named categories. Plain SVG 1.1, no scripts or external references, so any
// browser or Markdown viewer shows them next to the report.
#pragma once

#include <string>
#include <vector>

namespace dflash {

struct ChartSeries {
  std::string name;
  std::vector<double> values;  // one per x (line charts) or per category (bar charts)
};

struct ChartText {
  std::string title, x_label, y_label;
};

// Lines through (x[i], series.values[i]); every series has x.size() values. The y axis starts
// at 0 unless a value is negative.
std::string SvgLineChart(const ChartText& text, const std::vector<double>& x, const std::vector<ChartSeries>& series);
// Bars per category, one per series side by side.
std::string SvgBarChart(const ChartText& text, const std::vector<std::string>& categories,
                        const std::vector<ChartSeries>& series);

}  // namespace dflash
