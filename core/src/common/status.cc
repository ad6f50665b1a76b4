// Status construction and notes. Formatting for users lives in format_error.cc.
#include "tripy/status.h"

namespace tripy {

const std::string& Status::message() const {
  static const std::string kEmpty;
  return ok() ? kEmpty : state_->message;
}
const SourceRef& Status::where() const {
  static const SourceRef kNone;
  return ok() ? kNone : state_->where;
}
const std::vector<ErrorNote>& Status::notes() const {
  static const std::vector<ErrorNote> kNone;
  return ok() ? kNone : state_->notes;
}
Status& Status::note(std::string text, SourceRef where) {
  if (!ok()) state_->notes.push_back({std::move(text), std::move(where)});
  return *this;
}
Status& Status::at(SourceRef where) {
  if (!ok() && !state_->where) state_->where = std::move(where);
  return *this;
}

Status invalid_argument(std::string message, SourceRef where) {
  return Status(StatusCode::kInvalidArgument, std::move(message), std::move(where));
}
Status internal_error(std::string message, SourceRef where) {
  return Status(StatusCode::kInternal, std::move(message), std::move(where));
}
Status data_loss(std::string message) { return Status(StatusCode::kDataLoss, std::move(message)); }

}  // namespace tripy
