// Certificate files re-read on a timer and checked with OpenSSL before
// they are used.
#include "runtime/tls_watch.hpp"

#include <fstream>
#include <memory>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <optional>
#include <sstream>

#include <spdlog/spdlog.h>

namespace outrider::runtime {

namespace {

// A file's contents, at most 1 MiB (as at start); nullopt when unreadable.
std::optional<std::string> read_small(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return std::nullopt;
  std::ostringstream os;
  os << in.rdbuf();
  auto text = os.str();
  if (text.size() > 1024 * 1024)
    return std::nullopt;
  return text;
}

using ctx_ptr = std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)>;
using bio_ptr = std::unique_ptr<BIO, decltype(&BIO_free)>;

bio_ptr bio_of(const std::string& pem) {
  return {BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free};
}

} // namespace

std::string identity_problem(const pem_set& pem) {
  ctx_ptr ctx{SSL_CTX_new(TLS_method()), &SSL_CTX_free};
  if (!ctx)
    return "OpenSSL cannot make a context";
  auto cert_bio = bio_of(pem.cert);
  X509* leaf = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr);
  if (!leaf)
    return "the certificate is not PEM";
  int ok = SSL_CTX_use_certificate(ctx.get(), leaf);
  X509_free(leaf);
  if (ok != 1)
    return "the certificate is refused";
  auto key_bio = bio_of(pem.key);
  EVP_PKEY* key =
    PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
  if (!key)
    return "the key is not PEM";
  ok = SSL_CTX_use_PrivateKey(ctx.get(), key);
  EVP_PKEY_free(key);
  if (ok != 1 || SSL_CTX_check_private_key(ctx.get()) != 1)
    return "the key does not match the certificate";
  if (!pem.ca.empty()) {
    auto ca_bio = bio_of(pem.ca);
    X509* ca = PEM_read_bio_X509(ca_bio.get(), nullptr, nullptr, nullptr);
    if (!ca)
      return "the CA is not PEM";
    X509_free(ca);
  }
  return {};
}

tls_watch::tls_watch(pem_set paths, pem_set loaded,
                     std::chrono::milliseconds interval,
                     std::function<void(const pem_set&)> apply,
                     metrics_registry& m)
  : paths_(std::move(paths)), current_(std::move(loaded)), interval_(interval),
    apply_(std::move(apply)),
    applied_(m.get_counter("outrider_tls_reloads_total",
                           "Certificate file changes: applied to new "
                           "connections, or refused (not a usable "
                           "certificate and key; nothing changed)",
                           {{"outcome", "applied"}})),
    refused_count_(m.get_counter("outrider_tls_reloads_total",
                                 "Certificate file changes: applied to new "
                                 "connections, or refused (not a usable "
                                 "certificate and key; nothing changed)",
                                 {{"outcome", "refused"}})) {
  thread_ = std::thread([this] { run(); });
}

tls_watch::~tls_watch() {
  stop();
}

void tls_watch::stop() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void tls_watch::run() {
  std::unique_lock<std::mutex> guard{mtx_};
  while (!wake_.wait_for(guard, interval_, [this] { return stopping_; })) {
    guard.unlock();
    check();
    guard.lock();
  }
}

void tls_watch::check() {
  pem_set now;
  auto cert = read_small(paths_.cert);
  auto key = read_small(paths_.key);
  auto ca =
    paths_.ca.empty() ? std::optional<std::string>{""} : read_small(paths_.ca);
  if (!cert || !key || !ca)
    return; // mid-swap or gone: read again next turn, nothing changes
  now = {*cert, *key, *ca};
  if (now == current_ || now == refused_)
    return;
  if (auto why = identity_problem(now); !why.empty()) {
    refused_ = now;
    refused_count_.inc();
    spdlog::error("tls: {} changed but {}: still serving the previous "
                  "certificate",
                  paths_.cert, why);
    return;
  }
  current_ = now;
  refused_ = {};
  if (apply_)
    apply_(now);
  applied_.inc();
  spdlog::info("tls: {} changed: new connections get the new certificate",
               paths_.cert);
}

} // namespace outrider::runtime
