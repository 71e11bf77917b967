#include "bench/bench_procs.hpp"

#include <cstdlib>
#include <fstream>
#include <unistd.h>

namespace outrider::bench {

double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  // Fields after the command name (which may hold spaces): state is 3rd,
  // utime the 14th and stime the 15th of the whole line.
  auto close = stat.rfind(')');
  if (close == std::string::npos)
    return 0;
  std::istringstream rest{stat.substr(close + 2)};
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i)
    if (i >= 14)
      ticks += std::stod(field);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

bool have_python_grpc() {
  return std::system("/usr/bin/python3 -c 'import grpc' 2>/dev/null") == 0;
}

} // namespace outrider::bench
