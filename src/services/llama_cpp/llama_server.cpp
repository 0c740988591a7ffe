// llama-server started, watched and stopped (services/llama_cpp/llama_server.h).
#include "services/llama_cpp/llama_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <deque>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "format/perplexity_log.h"
#include "gguf_reap/error.h"
#include "io/output_file.h"
#include "io/paths.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"
#include "io/signals.h"
#include "services/llama_cpp/llama_runner.h"
#include "services/llama_cpp/llama_tools.h"

namespace gguf_reap::llama_cpp {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

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
    command_ =
        server_command({o_.binary, o_.model, port, o_.parallel, o_.ctx, o_.threads, o_.jinja}, o_.extra);
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
    return llama_cpp::log_tail(read_tail(o_.log_path));
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

void post_all(LlamaServer& server, std::string_view path, const std::vector<std::string>& bodies,
              uint64_t parallel, const std::function<void(size_t, HttpReply&&)>& on_reply) {
    post_all(server, std::vector<std::string_view>(bodies.size(), path), bodies, parallel, on_reply);
}

void post_all(LlamaServer& server, const std::vector<std::string_view>& paths,
              const std::vector<std::string>& bodies, uint64_t parallel,
              const std::function<void(size_t, HttpReply&&)>& on_reply) {
    HttpPool pool;
    size_t next = 0, done = 0;
    while (done < bodies.size()) {
        while (next < bodies.size() && pool.active() < parallel) {
            pool.post(next, server.url(paths[next]), bodies[next],
                      static_cast<long>(server.timeout_s()) * 1000);
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

std::string endpoint_words(bool chat) {
    return chat ? fmt::format("{}, then {}", kApplyTemplatePath, kCompletionPath)
                : std::string(kCompletionPath);
}

std::string completion_request_settings(uint64_t gen_tokens, const std::optional<Sampling>& s) {
    // Greedy: temperature 0 and top-k 1 (either alone is greedy in llama.cpp's sampler chain), a fixed
    // seed; the prompt is evaluated afresh for every request (no prompt cache shared between prompts).
    if (!s) {
        const json b = {{"n_predict", gen_tokens}, {"temperature", 0},      {"top_k", 1},     {"seed", 1},
                        {"return_tokens", true},   {"cache_prompt", false}, {"stream", false}};
        return b.dump();
    }
    const json b = {{"n_predict", gen_tokens}, {"temperature", s->temperature}, {"top_k", kSampleTopK},
                    {"top_p", kSampleTopP},    {"min_p", kSampleMinP},          {"seed", s->seed},
                    {"return_tokens", true},   {"cache_prompt", false},         {"stream", false}};
    return b.dump();
}

uint32_t sample_seed(uint64_t seed, double temperature, uint64_t prompt, uint64_t sample) {
    const std::string text = fmt::format("{}/{}/{}/{}", seed, json(temperature).dump(), prompt, sample);
    Sha256 h;
    h.update(text.data(), text.size());
    const Sha256::Digest d = h.finish();
    const uint32_t v = (uint32_t{d[0]} << 24) | (uint32_t{d[1]} << 16) | (uint32_t{d[2]} << 8) | d[3];
    return v == 0xFFFFFFFFu ? 0xFFFFFFFEu : v;
}

std::string parse_completion(const std::string& body, uint64_t gen_tokens, uint64_t n_vocab, Generation& g) {
    const json j = json::parse(body, nullptr, false);
    if (j.is_discarded()) return "not JSON";
    if (!j.is_object()) return "not a JSON object";
    if (!j.contains("tokens") || !j["tokens"].is_array())
        return "no \"tokens\" array (is this llama-server with return_tokens?)";
    if (!j.contains("stop_type") || !j["stop_type"].is_string()) return "no \"stop_type\" string";
    if (!j.contains("content") || !j["content"].is_string()) return "no \"content\" string";
    const std::string stop = j["stop_type"].get<std::string>();
    if (stop != "eos" && stop != "limit")
        return fmt::format(
            "stop_type \"{}\", where a greedy run without stop words ends with \"eos\" or "
            "\"limit\"",
            stop);
    const json& t = j["tokens"];
    if (t.size() > gen_tokens)
        return fmt::format("{} tokens, more than the {} asked for", t.size(), gen_tokens);
    g.tokens.clear();
    g.tokens.reserve(t.size());
    for (const json& v : t) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
            static_cast<uint64_t>(v.get<int64_t>()) >= n_vocab)
            return fmt::format("a token id {} outside the vocabulary of {}", v.dump(), n_vocab);
        g.tokens.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
    g.eog = stop == "eos";
    if (g.eog && g.tokens.empty()) return "stop_type \"eos\" with no token";
    g.text = j["content"].get<std::string>();
    return {};
}

std::string completion_body(const std::string& prompt, uint64_t gen_tokens,
                            const std::optional<Sampling>& s) {
    json b = json::parse(completion_request_settings(gen_tokens, s));
    b["prompt"] = prompt;
    return b.dump();
}

std::string chat_body(const json& line, uint64_t gen_tokens, const std::optional<Sampling>& s) {
    json b = json::parse(completion_request_settings(gen_tokens, s));
    b.erase("return_tokens");
    b["messages"] = line.at("messages");
    if (line.contains("tools")) b["tools"] = line["tools"];
    return b.dump();
}

std::string parse_chat(const std::string& body, uint64_t gen_tokens, ChatReply& r) {
    const json j = json::parse(body, nullptr, false);
    if (j.is_discarded()) return "not JSON";
    if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array() || j["choices"].empty())
        return "no \"choices\" array";
    const json& c = j["choices"][0];
    if (!c.is_object() || !c.contains("message") || !c["message"].is_object())
        return "no choices[0].message object";
    if (!c.contains("finish_reason") || !c["finish_reason"].is_string())
        return "no choices[0].finish_reason string";
    const std::string f = c["finish_reason"].get<std::string>();
    if (f != "stop" && f != "length" && f != "tool_calls")
        return fmt::format("finish_reason \"{}\", not \"stop\", \"length\" or \"tool_calls\"", f);
    const json& m = c["message"];
    if (m.contains("content") && !m["content"].is_string() && !m["content"].is_null())
        return "choices[0].message.content is neither a string nor null";
    const json* u = j.contains("usage") && j["usage"].is_object() ? &j["usage"] : nullptr;
    if (!u || !u->contains("completion_tokens") || !(*u)["completion_tokens"].is_number_unsigned())
        return "no usage.completion_tokens count";
    const uint64_t n = (*u)["completion_tokens"].get<uint64_t>();
    if (n > gen_tokens) return fmt::format("{} tokens, more than the {} asked for", n, gen_tokens);
    r.eog = f != "length";
    r.text = m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
    r.tokens = static_cast<int64_t>(n);
    r.message = m;
    return {};
}

std::string template_body(const std::string& prompt) {
    return json{{"messages", json::array({{{"role", "user"}, {"content", prompt}}})}}.dump();
}

std::optional<std::string> parse_template_reply(const std::string& body) {
    const json j = json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
        return std::nullopt;
    return j["prompt"].get<std::string>();
}

}  // namespace gguf_reap::llama_cpp
