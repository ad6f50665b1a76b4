// A double as Python's repr() writes it (shortest text that reads back the same, "2.0" not "2"),
// for error messages that quote a user's float. (snprintf, not iostreams: no locale involved.)
#pragma once
#include <string>

namespace tripy {
std::string number_text(double v);
}  // namespace tripy
