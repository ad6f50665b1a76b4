// The user-facing rendering of a Status: the user's code lines with carets, the message, then the
// notes (each with its own code). Source text is read here, lazily, so capturing a frame is cheap.
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tripy/status.h"

namespace tripy {
namespace {

// Reads each file once per formatted error; a file that cannot be read has no lines, and frames
// pointing into it show only their header (the code may have been run from a deleted temp file).
class SourceCache {
 public:
  // The 1-based line `line` of `file` without its line ending, or nullptr when unavailable.
  const std::string* line(const std::string& file, int line) {
    auto it = files_.find(file);
    if (it == files_.end()) it = files_.emplace(file, read_lines(file)).first;
    const std::vector<std::string>& lines = it->second;
    if (line < 1 || static_cast<size_t>(line) > lines.size()) return nullptr;
    return &lines[static_cast<size_t>(line) - 1];
  }

 private:
  static std::vector<std::string> read_lines(const std::string& file) {
    std::vector<std::string> lines;
    if (file.empty()) return lines;
    std::ifstream in(file, std::ios::binary);
    std::string text;
    while (std::getline(in, text)) {
      if (!text.empty() && text.back() == '\r') text.pop_back();
      lines.push_back(std::move(text));
    }
    return lines;
  }
  std::map<std::string, std::vector<std::string>> files_;
};

void strip_trailing_spaces(std::string& s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
}

// Appends "--> file:line in func()" and, when the source is readable, the numbered code line with
// carets under [col, end_col). The line number is right-aligned in a gutter of at least 5.
void append_frame(const SourceFrame& frame, SourceCache& cache, std::string& out) {
  out += "--> " + frame.file;
  if (frame.line > 0) out += ":" + std::to_string(frame.line);
  if (!frame.function.empty()) out += " in " + frame.function + "()";
  out += "\n";

  const std::string* code = cache.line(frame.file, frame.line);
  if (code == nullptr) return;
  std::string number = std::to_string(frame.line);
  const size_t width = number.size() < 5 ? 5 : number.size();
  const std::string blank_gutter(width + 1, ' ');

  out += blank_gutter + "|\n";
  out += std::string(width - number.size(), ' ') + number + " | " + *code + "\n";

  // Carets only under text that exists: clamp the span to the line, drop it when empty.
  const int len = static_cast<int>(code->size());
  const int begin = frame.col;
  const int end = frame.end_col < len ? frame.end_col : len;
  if (begin < 0 || end <= begin) return;
  std::string carets = blank_gutter + "| ";
  // Keep tabs from the code so the carets line up however the terminal renders them.
  for (int i = 0; i < begin; ++i) carets += (*code)[static_cast<size_t>(i)] == '\t' ? '\t' : ' ';
  carets.append(static_cast<size_t>(end - begin), '^');
  out += carets + "\n";
}

bool extra_error_information() {
  const char* env = std::getenv("TRIPY_EXTRA_ERROR_INFORMATION");
  return env != nullptr && env[0] != '\0';
}

// The innermost frame, and the callers after it when extra information is asked for.
void append_source(const SourceRef& where, bool all_frames, SourceCache& cache, std::string& out) {
  if (!where || where->empty()) return;
  const size_t shown = all_frames ? where->size() : 1;
  for (size_t i = 0; i < shown; ++i) append_frame((*where)[i], cache, out);
}

}  // namespace

std::string format_error(const Status& status) {
  if (status.ok()) return "";
  const bool all_frames = extra_error_information();
  SourceCache cache;
  std::string out;

  append_source(status.where(), all_frames, cache, out);
  if (!out.empty()) out += "\n";
  out += status.message();
  for (const ErrorNote& note : status.notes()) {
    out += "\n\n" + note.text;
    if (note.where && !note.where->empty()) {
      out += "\n";
      append_source(note.where, all_frames, cache, out);
      out.pop_back();  // the block ends in a newline; the text as a whole does not
    }
  }
  // Code lines and messages may end in blanks; the rendering never does (stable for tests).
  std::string clean;
  clean.reserve(out.size());
  size_t start = 0;
  while (start <= out.size()) {
    size_t nl = out.find('\n', start);
    if (nl == std::string::npos) nl = out.size();
    std::string line = out.substr(start, nl - start);
    strip_trailing_spaces(line);
    clean += line;
    if (nl < out.size()) clean += "\n";
    start = nl + 1;
  }
  return clean;
}

}  // namespace tripy
