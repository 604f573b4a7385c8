// kernelpilot file I/O contract for source-kernel runners (plain C++17, no SYCL).
//
// Input directory (written by kernelpilot, read by the runner):
//   manifest.jsonl  one JSON object per line and tensor, keys in this order:
//     {"index": 0, "name": "X", "role": "input", "dtype_code": 2, "shape": [4, 8], "nbytes": 128, "file": "t0.bin"}
//     role: input | param | output.  Output files hold the poisoned initial contents.
//   t<i>.bin        the raw bytes of tensor i (C order, little endian, no header).
// Output directory (written by the runner, read by kernelpilot):
//   t<i>.bin        the raw bytes of every output tensor after the first call
//   result.json     {"status": 0, "device": "...", "samples_ms": [...]}  status: kp_forward's return code
//
// Errors (unreadable manifest, size mismatch) print one line to stderr and exit with code 2.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernelpilot_tensor.hpp"

namespace kp_io {

struct Entry {
  int index = -1;
  std::string name, role, file;
  int dtype_code = -1;
  std::vector<int64_t> shape;
  int64_t nbytes = 0;
};

[[noreturn]] inline void fail(const std::string& message) {
  std::fprintf(stderr, "kp_io: %s\n", message.c_str());
  std::exit(2);
}

inline std::string raw_value(const std::string& line, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  size_t at = line.find(needle);
  if (at == std::string::npos) fail("manifest line lacks key " + key + ": " + line);
  at += needle.size();
  while (at < line.size() && line[at] == ' ') ++at;
  size_t end = at;
  if (line[at] == '"') {
    end = line.find('"', at + 1);
    return line.substr(at + 1, end - at - 1);
  }
  if (line[at] == '[') {
    end = line.find(']', at);
    return line.substr(at + 1, end - at - 1);
  }
  while (end < line.size() && line[end] != ',' && line[end] != '}') ++end;
  return line.substr(at, end - at);
}

inline std::vector<Entry> read_manifest(const std::string& dir) {
  std::ifstream in(dir + "/manifest.jsonl");
  if (!in) fail("cannot open " + dir + "/manifest.jsonl");
  std::vector<Entry> entries;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find('{') == std::string::npos) continue;
    Entry e;
    e.index = std::stoi(raw_value(line, "index"));
    e.name = raw_value(line, "name");
    e.role = raw_value(line, "role");
    e.dtype_code = std::stoi(raw_value(line, "dtype_code"));
    std::stringstream dims(raw_value(line, "shape"));
    std::string dim;
    while (std::getline(dims, dim, ',')) {
      if (dim.find_first_not_of(' ') != std::string::npos) e.shape.push_back(std::stoll(dim));
    }
    e.nbytes = std::stoll(raw_value(line, "nbytes"));
    e.file = raw_value(line, "file");
    if (e.index != static_cast<int>(entries.size())) fail("manifest indices must be 0, 1, 2, ...");
    if (e.shape.size() > KP_MAX_DIMS) fail("tensor " + e.name + " has more than 8 dimensions");
    entries.push_back(e);
  }
  return entries;
}

inline std::vector<char> read_bytes(const std::string& path, int64_t expected) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open " + path);
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (static_cast<int64_t>(data.size()) != expected)
    fail(path + " holds " + std::to_string(data.size()) + " bytes, manifest says " + std::to_string(expected));
  return data;
}

inline void write_bytes(const std::string& path, const void* data, int64_t size) {
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("cannot write " + path);
  out.write(static_cast<const char*>(data), size);
}

// Descriptor for a contiguous tensor at `data` (strides derived from the shape).
inline kp_tensor describe(const Entry& e, void* data) {
  kp_tensor t{};
  t.data = data;
  t.dtype = e.dtype_code;
  t.ndim = static_cast<int32_t>(e.shape.size());
  int64_t stride = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    t.shape[i] = e.shape[i];
    t.stride[i] = stride;
    stride *= e.shape[i];
  }
  return t;
}

inline std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

inline void write_result(const std::string& dir, int status, const std::string& device,
                         const std::vector<double>& samples_ms) {
  std::ofstream out(dir + "/result.json");
  if (!out) fail("cannot write " + dir + "/result.json");
  out << "{\"status\": " << status << ", \"device\": \"" << json_escape(device) << "\", \"samples_ms\": [";
  for (size_t i = 0; i < samples_ms.size(); ++i) out << (i ? ", " : "") << samples_ms[i];
  out << "]}\n";
}

// Command line: --input_dir D --output_dir O [--warmup N] [--reps N]
struct Args {
  std::string input_dir, output_dir;
  int warmup = 3, reps = 20;
};

inline Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string key = argv[i];
    if (i + 1 >= argc) fail("missing value after " + key);
    std::string value = argv[++i];
    if (key == "--input_dir") a.input_dir = value;
    else if (key == "--output_dir") a.output_dir = value;
    else if (key == "--warmup") a.warmup = std::stoi(value);
    else if (key == "--reps") a.reps = std::stoi(value);
    else fail("unknown argument " + key + " (allowed: --input_dir --output_dir --warmup --reps)");
  }
  if (a.input_dir.empty() || a.output_dir.empty()) fail("--input_dir and --output_dir are required");
  return a;
}

}  // namespace kp_io
