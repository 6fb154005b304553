// The Boost.Beast transport; see http_server.h.
#include "server/http_server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include <atomic>
#include <csignal>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/logging.h"
#include "server/stream_session.h"

namespace oasr::server {
namespace {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr size_t kHeaderLimit = 64 * 1024;

bool is_http_parse_error(const beast::error_code& ec) {
  return &ec.category() == &beast::http::make_error_code(http::error::bad_version).category();
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, TranscriptionService& service, const ListenOptions& options,
          std::atomic<int>& in_flight)
      : stream_(std::move(socket)), service_(service), options_(options), in_flight_(in_flight) {}

  void start() {
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&Session::read, shared_from_this()));
  }

 private:
  void read() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(service_.options().max_upload_bytes);
    // A client gets idle_timeout for each request, headers and body: a
    // slow or silent one is dropped.
    stream_.expires_after(options_.idle_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, size_t) {
    if (ec == http::error::body_limit) {
      Request header = parser_->get();
      header.keep_alive(false);
      linger_ = true;  // the client is still sending the body: read it away after the reply
      write(service_.too_large(header), true);
      return;
    }
    if (ec && is_http_parse_error(ec) && ec != http::error::end_of_stream &&
        ec != http::error::partial_message) {
      Request header;
      header.version(11);
      header.keep_alive(false);
      write(service_.error(header, "(unparsed)", http::status::bad_request, "invalid_request_error",
                           "malformed_request", "malformed HTTP request: " + ec.message()),
            true);
      return;
    }
    if (ec) {  // end of stream, timeout, reset, truncated body: nobody to answer
      close();
      return;
    }
    if (beast::websocket::is_upgrade(parser_->get())) {
      upgrade(parser_->release());
      return;
    }
    // Decoding time is not the client's idle time.
    stream_.expires_never();
    ++in_flight_;
    counted_ = true;
    auto self = shared_from_this();
    service_.handle(parser_->release(), [self](Response response) {
      auto shared = std::make_shared<Response>(std::move(response));
      net::post(self->stream_.get_executor(),
                [self, shared] { self->write(std::move(*shared), false); });
    });
  }

  // A WebSocket upgrade: only GET /v1/audio/stream takes one, with the key
  // when --api-key is set; the socket then belongs to the stream session.
  void upgrade(Request request) {
    const std::string target(request.target().data(), request.target().size());
    const std::string path = target.substr(0, target.find('?'));
    if (path != "/v1/audio/stream") {
      write(service_.error(request, path, http::status::not_found, "invalid_request_error",
                           "not_found",
                           "WebSocket upgrade on " + path + ": only /v1/audio/stream streams"),
            true);
      return;
    }
    if (auto refused = service_.refuse_unauthorized(request, path)) {
      write(std::move(*refused), true);
      return;
    }
    if (service_.draining()) {
      write(service_.error(request, path, http::status::service_unavailable, "server_error",
                           "draining", "the server is shutting down"),
            true);
      return;
    }
    start_stream_session(stream_.release_socket(), std::move(request), service_, options_);
  }

  void write(Response response, bool close_after) {
    response_ = std::make_shared<Response>(std::move(response));
    const bool close = close_after || response_->need_eof();
    stream_.expires_after(options_.idle_timeout);
    http::async_write(stream_, *response_,
                      [self = shared_from_this(), close](beast::error_code ec, size_t) {
                        self->on_write(close, ec);
                      });
  }

  void on_write(bool close_after, beast::error_code ec) {
    response_.reset();
    if (counted_) {
      counted_ = false;
      --in_flight_;
    }
    if (!ec && linger_) {
      linger();
      return;
    }
    if (ec || close_after || service_.draining()) {
      close();
      return;
    }
    read();
  }

  // Lingering close: a client refused mid-upload (413) gets its reply only
  // if it can finish sending, so the rest is read and dropped, bounded by
  // the idle timeout and four upload limits, before the socket closes.
  void linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    discard_.resize(64 * 1024);
    stream_.expires_after(options_.idle_timeout);
    stream_.async_read_some(
        net::buffer(discard_), [self = shared_from_this()](beast::error_code ec, size_t n) {
          self->discarded_ += n;
          if (ec || self->discarded_ > 4 * self->service_.options().max_upload_bytes) {
            self->close();
            return;
          }
          self->linger();
        });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<Response> response_;
  TranscriptionService& service_;
  const ListenOptions& options_;
  std::atomic<int>& in_flight_;
  bool counted_ = false;
  bool linger_ = false;
  std::vector<char> discard_;
  size_t discarded_ = 0;
};

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(net::io_context& io, const tcp::endpoint& endpoint, TranscriptionService& service,
           const ListenOptions& options, std::atomic<int>& in_flight)
      : io_(io),
        acceptor_(net::make_strand(io)),
        service_(service),
        options_(options),
        in_flight_(in_flight) {
    beast::error_code ec;
    const std::string where =
        endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    OASR_CHECK(!ec, kIo, "--host/--port ", where, ": cannot listen: ", ec.message(),
               ec == net::error::address_in_use
                   ? " (another process holds the port; pick another --port)"
                   : "");
  }

  tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }

  void accept() {
    acceptor_.async_accept(net::make_strand(io_),
                           beast::bind_front_handler(&Listener::on_accept, shared_from_this()));
  }

  void stop() {
    net::post(acceptor_.get_executor(), [self = shared_from_this()] {
      beast::error_code ignored;
      self->acceptor_.close(ignored);
    });
  }

 private:
  void on_accept(beast::error_code ec, tcp::socket socket) {
    if (!acceptor_.is_open()) return;
    if (!ec) std::make_shared<Session>(std::move(socket), service_, options_, in_flight_)->start();
    accept();
  }

  net::io_context& io_;
  tcp::acceptor acceptor_;
  TranscriptionService& service_;
  const ListenOptions& options_;
  std::atomic<int>& in_flight_;
};

}  // namespace

void serve(TranscriptionService& service, const ListenOptions& options) {
  OASR_CHECK(options.threads >= 1, kInvalidArgument, "--http-threads must be at least 1");
  OASR_CHECK(options.port >= 0 && options.port <= 65535, kInvalidArgument, "--port ", options.port,
             ": expected 0-65535");
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(options.host, ec);
  OASR_CHECK(!ec, kInvalidArgument, "--host ", options.host,
             ": not an IP address (for example 127.0.0.1, 0.0.0.0 or ::1)");
  net::io_context io(options.threads);
  std::atomic<int> in_flight{0};
  auto listener = std::make_shared<Listener>(
      io, tcp::endpoint(address, static_cast<unsigned short>(options.port)), service, options,
      in_flight);
  const tcp::endpoint bound = listener->local_endpoint();
  listener->accept();

  // While a request is decoded its session waits on no socket: the guard
  // keeps the io threads running for the reply (until the drain ends).
  auto work = net::make_work_guard(io);
  std::thread drainer;
  net::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const beast::error_code& error, int signal) {
    if (error) return;
    log::info("signal {}: draining (no new requests; finishing {} in flight)", signal,
              in_flight.load());
    listener->stop();
    drainer = std::thread([&] {
      service.drain();  // the queued utterances are decoded and answered
      // Let the answers reach their clients, then stop the io threads.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (in_flight.load() > 0 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      work.reset();
      io.stop();
    });
  });

  // Announced only once SIGINT / SIGTERM are handled: a supervisor that
  // stops the server as soon as it reads this line gets a drain, not a kill.
  log::info("listening on http://{}:{}", bound.address().to_string(), bound.port());
  std::vector<std::thread> pool;
  for (int i = 1; i < options.threads; ++i) pool.emplace_back([&] { io.run(); });
  io.run();
  for (std::thread& t : pool) t.join();
  if (drainer.joinable()) drainer.join();
  log::info("drained; exiting");
}

}  // namespace oasr::server
