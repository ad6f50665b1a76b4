// Errors as values: every failure in the core is a Status carrying the user's source location and
// notes; the Python binding turns it into tp.TripyException, a C++ caller reads status.message().
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tripy {

// One frame of the user's code, innermost first. Columns are 0-based [col, end_col) on `line`,
// or -1 when unknown. Source text is read from `file` only when an error is formatted.
struct SourceFrame {
  std::string file;
  int line = 0;
  std::string function;
  int col = -1;
  int end_col = -1;
};
using SourceInfo = std::vector<SourceFrame>;
using SourceRef = std::shared_ptr<const SourceInfo>;

// A note under an error: text, optionally followed by the code it refers to.
struct ErrorNote {
  std::string text;
  SourceRef where;
};

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,  // a user's call is wrong (shape, dtype, value)
  kOutOfRange,       // a runtime input outside its declared bounds
  kNotFound,
  kDataLoss,     // a corrupt or truncated executable file
  kUnavailable,  // a device or library is missing
  kResourceExhausted,
  kInternal,  // a broken invariant inside Tripy
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message, SourceRef where = nullptr)
      : state_(std::make_shared<State>(State{code, std::move(message), std::move(where), {}})) {}

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return ok() ? StatusCode::kOk : state_->code; }
  const std::string& message() const;
  const SourceRef& where() const;
  const std::vector<ErrorNote>& notes() const;

  // Adds context; returns *this so calls chain: `return st.note("...", src);`.
  Status& note(std::string text, SourceRef where = nullptr);
  // Sets the primary location if none is set yet (inner errors keep the most precise one).
  Status& at(SourceRef where);

 private:
  struct State {
    StatusCode code;
    std::string message;
    SourceRef where;
    std::vector<ErrorNote> notes;
  };
  std::shared_ptr<State> state_;
};

inline Status ok_status() { return Status(); }
Status invalid_argument(std::string message, SourceRef where = nullptr);
Status internal_error(std::string message, SourceRef where = nullptr);
Status data_loss(std::string message);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}
  StatusOr(Status status) : v_(std::move(status)) {}
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

// Renders a Status as the user sees it: the code lines with carets, the message, then the notes.
std::string format_error(const Status& status);

}  // namespace tripy

#define TRIPY_CONCAT_INNER(a, b) a##b
#define TRIPY_CONCAT(a, b) TRIPY_CONCAT_INNER(a, b)

#define TRIPY_RETURN_IF_ERROR(expr)           \
  do {                                        \
    ::tripy::Status _tripy_st = (expr);       \
    if (!_tripy_st.ok()) return _tripy_st;    \
  } while (0)

#define TRIPY_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#define TRIPY_ASSIGN_OR_RETURN(lhs, expr) \
  TRIPY_ASSIGN_OR_RETURN_IMPL(TRIPY_CONCAT(_tripy_so_, __LINE__), lhs, expr)
