#include "transport/ucx/ucx_context.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "common/logging.h"

namespace syncline::ucx {
namespace {

// The value UCX settled on for `name` (e.g. "TLS"), from its own config dump:
// UCX reads UCX_* from the environment itself, so this reflects what it uses.
std::string ConfigValue(const ucp_config_t* config, const std::string& name) {
  char* text = nullptr;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  if (out == nullptr) return "";
  ucp_config_print(config, out, nullptr, UCS_CONFIG_PRINT_CONFIG);
  std::fclose(out);
  std::string dump(text != nullptr ? text : "", size);
  std::free(text);
  std::istringstream lines(dump);
  const std::string key = "UCX_" + name + "=";
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(key, 0) == 0) return line.substr(key.size());
  return "";
}

std::set<std::string> SplitList(const std::string& list) {
  std::set<std::string> out;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.insert(item);
  return out;
}

// Transports that only reach processes of the same host (shared memory, GPU IPC).
bool IsHostLocal(const std::string& tl) {
  static const std::set<std::string> kLocal{"sm",       "shm",      "mm",        "posix",    "sysv",
                                            "xpmem",    "knem",     "cma",       "self",     "cuda",
                                            "cuda_copy", "cuda_ipc", "gdr_copy", "rocm",     "rocm_copy",
                                            "rocm_ipc", "rocm_gdr"};
  return kLocal.count(tl) > 0;
}

}  // namespace

TransportChoice ChooseTransports(const std::string& tls) {
  TransportChoice choice;
  choice.tls = tls;
  const std::set<std::string> names = SplitList(tls);
  if (tls.empty() || tls[0] == '^') return choice;  // "all" or "all but ...": UCX decides, with peer-failure handling
  bool any_local = false, any_network = false;
  for (const std::string& tl : names) {
    if (tl == "self") continue;  // a worker's loopback to itself: neither
    (IsHostLocal(tl) ? any_local : any_network) = true;
  }
  if (names.count("all")) return choice;
  // UCX cannot report dead peers over shared memory: asking for peer-failure
  // handling would exclude it, so with shared memory on the list connections
  // go without it (heartbeats in the control plane detect dead peers anyway).
  choice.peer_failure_handling = !any_local;
  // UCX sets connections up through a connection manager on the network
  // device of the listen address (TCP sockets, or RDMA-CM), and will only do so
  // when a transport on that device is enabled: add tcp for it. Between
  // processes of one host, data still goes over shared memory.
  if (!any_network) {
    choice.tls = tls + ",tcp";
    choice.added_tcp = true;
  }
  return choice;
}

Result<std::unique_ptr<Context>> Context::Open() {
  ucp_config_t* config = nullptr;
  if (ucs_status_t st = ucp_config_read(nullptr, nullptr, &config); st != UCS_OK)
    return Unavailable("cannot read the UCX configuration (UCX_* environment): " + StatusText(st));
  const std::string requested = ConfigValue(config, "TLS");
  const std::string devices = ConfigValue(config, "NET_DEVICES");
  TransportChoice choice = ChooseTransports(requested == "all" ? "" : requested);
  if (choice.added_tcp) {
    SYNCLINE_LOG_DEBUG("UCX_TLS={} names no network transport; using {} so UCX can set up connections",
                       requested, choice.tls);
    (void)ucp_config_modify(config, "TLS", choice.tls.c_str());
  }

  std::unique_ptr<Context> c(new Context());
  c->tls_ = requested;
  c->peer_failure_handling_ = choice.peer_failure_handling;
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.name = "syncline";
  const ucs_status_t init = ucp_init(&params, config, &c->context_);
  ucp_config_release(config);
  if (init != UCS_OK) {
    c->context_ = nullptr;
    const std::string asked =
        "UCX_TLS=" + requested + (devices.empty() || devices == "all" ? "" : " UCX_NET_DEVICES=" + devices);
    if (init == UCS_ERR_NO_DEVICE)
      return Unavailable("UCX found no usable transport (" + asked + "): " + StatusText(init) +
                         ". There is no RDMA (InfiniBand/RoCE) device here that UCX can use for the transports"
                         " asked for; leave UCX_TLS unset, set UCX_TLS=tcp or UCX_TLS=sm, or use"
                         " SYNCLINE_TRANSPORT=tcp");
    return Unavailable("UCX cannot start (" + asked + "): " + StatusText(init) +
                       "; check the UCX_* settings (UCX_TLS unset lets UCX choose), or use SYNCLINE_TRANSPORT=tcp");
  }
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  if (ucs_status_t st = ucp_worker_create(c->context_, &wp, &c->worker_); st != UCS_OK) {
    c->worker_ = nullptr;
    return Unavailable("cannot create a UCX worker (UCX_TLS=" + requested + "): " + StatusText(st));
  }
  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  if (ucs_status_t st = ucp_worker_query(c->worker_, &attr); st != UCS_OK)
    return Unavailable("cannot query the UCX worker: " + StatusText(st));
  c->max_am_header_ = attr.max_am_header;
  if (ucs_status_t st = ucp_worker_get_efd(c->worker_, &c->event_fd_); st != UCS_OK)
    return Unavailable("UCX transports (UCX_TLS=" + requested + ") cannot wake a waiting thread: " + StatusText(st));
  return c;
}

Context::~Context() {
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

Result<UcxAddress> ParseAddress(const std::string& address) {
  const std::string scheme = "ucx://";
  if (address.rfind(scheme, 0) != 0) return InvalidArgument("ucx address must start with ucx://: " + address);
  const std::string rest = address.substr(scheme.size());
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size())
    return InvalidArgument("ucx address must be ucx://host:port: " + address);
  UcxAddress out;
  out.host = rest.substr(0, colon);
  const std::string port = rest.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 || std::stoi(port) > 65535)
    return InvalidArgument("bad port in ucx address " + address);
  out.port = std::stoi(port);
  std::string lookup = out.host;
  if (lookup.size() > 2 && lookup.front() == '[' && lookup.back() == ']') lookup = lookup.substr(1, lookup.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(lookup.c_str(), port.c_str(), &hints, &found); rc != 0 || found == nullptr)
    return Unavailable("cannot resolve the host of " + address + ": " + gai_strerror(rc));
  std::memcpy(&out.resolved.storage, found->ai_addr, found->ai_addrlen);
  out.resolved.length = found->ai_addrlen;
  freeaddrinfo(found);
  return out;
}

std::string FormatAddress(const std::string& host, int port) { return "ucx://" + host + ":" + std::to_string(port); }

int PortOf(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  return 0;
}

std::string StatusText(ucs_status_t status) { return ucs_status_string(status); }

}  // namespace syncline::ucx
