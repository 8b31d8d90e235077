/** \file
 * The plain-text Planetoid reader shared by the C++ examples (train_cora.cpp,
 * train_minibatch.cpp): files as described in python/seastar/datasets/data/README.md, errors
 * naming the file and line.
 */
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/graph/graph.h"

namespace seastar_examples {

struct Dataset {
  seastar::Graph graph;
  torch::Tensor x;  ///< [N, F] float32, row-normalised (sparse COO or dense)
  torch::Tensor y;  ///< [N] int64
  torch::Tensor train_mask, val_mask, test_mask;
  int64_t num_features = 0, num_classes = 0;
};

/// A whitespace-separated text file read record by record, with errors naming file and line.
class Records {
 public:
  explicit Records(const std::string& path) : path_(path), in_(path) {
    if (!in_) throw std::runtime_error("cannot open " + path);
  }
  /// The next non-blank line split into exactly `n` fields; false at the end of the file.
  bool next(size_t n, const char* form, std::vector<std::string>& fields) {
    std::string text;
    while (std::getline(in_, text)) {
      ++line_;
      std::istringstream ss(text);
      fields.clear();
      for (std::string f; ss >> f;) fields.push_back(f);
      if (fields.empty()) continue;
      if (fields.size() != n) fail(std::string("expected '") + form + "', got '" + text + "'");
      ++records_;
      return true;
    }
    return false;
  }
  int64_t integer(const std::string& s, int64_t bound, const char* what) const {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || s.empty()) fail(std::string(what) + " '" + s + "' is not an integer");
    if (v < 0 || v >= bound) fail(std::string(what) + " " + s + " is out of range [0, " + std::to_string(bound) + ")");
    return v;
  }
  double number(const std::string& s, const char* what) const {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || s.empty()) fail(std::string(what) + " '" + s + "' is not a number");
    return v;
  }
  [[noreturn]] void fail(const std::string& message) const {
    throw std::runtime_error(path_ + ": line " + std::to_string(line_) + ": " + message);
  }
  int64_t records() const { return records_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ifstream in_;
  int64_t line_ = 0, records_ = 0;
};

inline void expect(const std::string& path, const char* what, int64_t got, int64_t expected) {
  if (got != expected)
    throw std::runtime_error(path + ": " + std::to_string(got) + " " + what + ", but meta.txt says " +
                             std::to_string(expected));
}

inline Dataset load_planetoid(const std::string& dir, bool sparse_features) {
  std::vector<std::string> f;
  std::map<std::string, int64_t> meta;
  {
    Records r(dir + "/meta.txt");
    while (r.next(2, "key count", f)) meta[f[0]] = r.integer(f[1], INT64_MAX, "count");
    for (const char* k : {"nodes", "edges", "features", "classes"})
      if (!meta.count(k)) throw std::runtime_error(r.path() + ": missing key " + k);
  }
  const int64_t n = meta["nodes"], nf = meta["features"], nc = meta["classes"];
  Dataset ds;
  ds.num_features = nf;
  ds.num_classes = nc;

  std::vector<int64_t> src, dst;
  {
    Records r(dir + "/edges.txt");
    while (r.next(2, "src dst", f)) {
      src.push_back(r.integer(f[0], n, "source node"));
      dst.push_back(r.integer(f[1], n, "destination node"));
    }
    expect(r.path(), "edges", r.records(), meta["edges"]);
  }
  auto ei = torch::stack({torch::tensor(src, torch::kLong), torch::tensor(dst, torch::kLong)});
  ds.graph = seastar::Graph::from_edge_index(ei, n);

  // features: row-normalised in float64 (rows without non-zeros stay zero), stored as float32
  std::vector<int64_t> rows, cols;
  std::vector<double> values;
  {
    Records r(dir + "/features.txt");
    while (r.next(3, "node feature value", f)) {
      rows.push_back(r.integer(f[0], n, "node"));
      cols.push_back(r.integer(f[1], nf, "feature"));
      values.push_back(r.number(f[2], "value"));
    }
    if (meta.count("feature_nnz")) expect(r.path(), "non-zero features", r.records(), meta["feature_nnz"]);
  }
  std::vector<double> row_sum(n, 0.0);
  for (size_t i = 0; i < values.size(); ++i) row_sum[rows[i]] += values[i];
  for (size_t i = 0; i < values.size(); ++i) values[i] = row_sum[rows[i]] != 0 ? values[i] / row_sum[rows[i]] : 0.0;
  auto idx = torch::stack({torch::tensor(rows, torch::kLong), torch::tensor(cols, torch::kLong)});
  auto vals = torch::tensor(values, torch::kDouble).to(torch::kFloat);
  ds.x = torch::sparse_coo_tensor(idx, vals, {n, nf}).coalesce();  // also sums duplicate entries
  if (!sparse_features) ds.x = ds.x.to_dense();

  std::vector<int64_t> labels;
  {
    Records r(dir + "/labels.txt");
    while (r.next(1, "class", f)) labels.push_back(r.integer(f[0], nc, "class"));
    expect(r.path(), "labels (one per node)", r.records(), n);
  }
  ds.y = torch::tensor(labels, torch::kLong);

  std::map<std::string, std::vector<int64_t>> split{{"train", {}}, {"val", {}}, {"test", {}}};
  {
    Records r(dir + "/split.txt");
    std::vector<char> seen(n, 0);
    while (r.next(2, "train|val|test node", f)) {
      auto it = split.find(f[0]);
      if (it == split.end()) r.fail("unknown split '" + f[0] + "', expected one of train, val, test");
      int64_t v = r.integer(f[1], n, "node");
      if (seen[v]++) r.fail("node " + f[1] + " is listed twice");
      it->second.push_back(v);
    }
    for (const auto& [k, ids] : split)
      if (meta.count(k)) expect(r.path(), (k + " nodes").c_str(), static_cast<int64_t>(ids.size()), meta[k]);
  }
  std::map<std::string, torch::Tensor> masks;
  for (const auto& [k, ids] : split)
    masks[k] = torch::zeros({n}, torch::kBool).index_fill_(0, torch::tensor(ids, torch::kLong), true);
  ds.train_mask = masks["train"];
  ds.val_mask = masks["val"];
  ds.test_mask = masks["test"];
  return ds;
}

}  // namespace seastar_examples
