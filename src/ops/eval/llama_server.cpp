#include "ops/eval/llama_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <deque>

#include <fmt/format.h>

#include "format/perplexity_log.h"
#include "gguf_reap/error.h"
#include "io/output_file.h"
#include "io/paths.h"
#include "io/sequential_reader.h"
#include "io/signals.h"
#include "ops/eval/eval_internal.h"

namespace gguf_reap::eval_detail {

namespace {

using Clock = std::chrono::steady_clock;

void sleep_ms(long ms) {
    timespec ts{ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, nullptr);
}

std::string read_tail(const std::string& path) {
    try {
        return read_small_file(path, kLogLimit, "llama-server log");
    } catch (const std::exception& e) {
        return fmt::format("(its log {} cannot be read: {})", path, e.what());
    }
}

}  // namespace

uint16_t free_loopback_port() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw IoError("socket", "cannot create a socket to find a free port", errno);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        const int e = errno;
        close(fd);
        throw IoError("127.0.0.1", "cannot find a free port", e);
    }
    close(fd);
    return ntohs(a.sin_port);
}

LlamaServer::LlamaServer(ServerOptions o, const Events& ev) : o_(std::move(o)), ev_(ev) {
    {
        OutputFile log(o_.log_path);  // exists, empty, before the child appends to it
        log.commit(false);
    }
    for (int attempt = 1;; ++attempt) {
        if (start_on(free_loopback_port())) return;
        if (attempt == kPortAttempts)
            fail(fmt::format("llama-server on {} found its port taken {} times", base_name(o_.model),
                             kPortAttempts));
        ev_.warn(fmt::format("llama-server on {}: port {} was taken before it could bind it; trying another",
                             base_name(o_.model), port_));
    }
}

bool LlamaServer::start_on(uint16_t port) {
    port_ = port;
    command_ = {o_.binary,
                "-m",
                o_.model,
                "--host",
                "127.0.0.1",
                "--port",
                std::to_string(port),
                "-np",
                std::to_string(o_.parallel),
                "-c",
                std::to_string(o_.ctx),
                "--no-webui",
                "--cors-origins",
                "localhost"};
    if (o_.threads > 0) command_.insert(command_.end(), {"-t", std::to_string(o_.threads)});
    command_.insert(command_.end(), o_.extra_args.begin(), o_.extra_args.end());
    const size_t log_start = read_tail(o_.log_path).size();
    child_.emplace(command_, o_.log_path);
    ev_.info(fmt::format("llama-server on {}: pid {}, 127.0.0.1:{}, log {}", base_name(o_.model),
                         child_->pid(), port, o_.log_path));
    const auto deadline = Clock::now() + std::chrono::seconds(o_.timeout_s);
    for (;;) {
        if (interrupted()) {
            stop();
            throw Interrupted();
        }
        if (child_->exited()) {
            const std::string log = read_tail(o_.log_path);
            if (log.size() > log_start && log.find(kPortTakenLine, log_start) != std::string::npos) {
                child_.reset();
                return false;
            }
            fail(fmt::format("llama-server on {} exited before it was ready", base_name(o_.model)));
        }
        const HttpReply h = http_get(url("/health"), 2000);
        // A healthy answer counts only from our child: another program on the port would leave ours
        // exiting with kPortTakenLine, which the next pass sees.
        if (h.connected() && h.status == 200 && !child_->exited()) return true;
        if (Clock::now() >= deadline)
            fail(fmt::format("llama-server on {} was not ready (GET /health: {}) after {} s",
                             base_name(o_.model), h.connected() ? fmt::format("HTTP {}", h.status) : h.error,
                             o_.timeout_s));
        sleep_ms(100);
    }
}

std::string LlamaServer::url(std::string_view path) const {
    return fmt::format("http://127.0.0.1:{}{}", port_, path);
}

std::string LlamaServer::log_tail() const {
    return last_lines(read_tail(o_.log_path), kErrorLines);
}

void LlamaServer::check_running(long grace_ms) {
    if (!child_) return;
    for (long waited = 0;; waited += 20) {
        if (child_->exited())
            fail(fmt::format("llama-server on {} exited while generating", base_name(o_.model)));
        if (waited >= grace_ms) return;
        sleep_ms(20);
    }
}

void LlamaServer::fail(const std::string& what) {
    std::string how;
    if (child_) {
        const bool was_running = !child_->exited();
        const ChildExit e = child_->stop();
        how = was_running ? "; stopped" : fmt::format(" ({})", e.describe());
    }
    throw IoError(o_.binary, fmt::format("{}{}; its log {} ends:\n{}", what, how, o_.log_path, log_tail()));
}

void LlamaServer::stop() {
    if (child_) child_->stop();
}

void post_all(LlamaServer& server, const std::string& path, const std::vector<std::string>& bodies,
              uint64_t parallel, const std::function<void(size_t, HttpReply&&)>& on_reply) {
    HttpPool pool;
    const std::string url = server.url(path);
    size_t next = 0, done = 0;
    while (done < bodies.size()) {
        while (next < bodies.size() && pool.active() < parallel) {
            pool.post(next, url, bodies[next]);
            ++next;
        }
        for (HttpPool::Done& d : pool.poll(100)) {
            ++done;
            on_reply(static_cast<size_t>(d.tag), std::move(d.reply));
        }
        if (interrupted()) {
            server.stop();
            throw Interrupted();
        }
        server.check_running();
    }
}

}  // namespace gguf_reap::eval_detail
