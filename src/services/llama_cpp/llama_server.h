// llama.cpp's llama-server as eval's generation runtime (docs/eval.md, "Behaviour"): one per model,
// started without a shell, bound to 127.0.0.1 on a free port, ready when /health answers 200, stopped
// by pid (SIGTERM, then SIGKILL) however eval ends: done, failed or interrupted. Its HTTP API as eval
// uses it is here too: the /completion request and reply, and /apply-template.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_reap/events.h"
#include "gguf_reap/llama_args.h"
#include "io/child_process.h"
#include "io/loopback_http.h"

namespace gguf_reap::llama_cpp {

struct ServerOptions {
    std::string binary;        // llama-server
    std::string model;         // any shard of it
    uint64_t parallel = 4;     // -np
    uint64_t ctx = 0;          // -c, over all slots
    uint64_t threads = 0;      // -t; 0 = llama.cpp's default
    bool jinja = false;        // --jinja: a panel holds a chat line
    LlamaArgs extra;           // --llama-args: those llama-server takes, after ours
    std::string log_path;      // its stdout and stderr (truncated at the start)
    uint64_t timeout_s = 600;  // to become healthy, and for each request (post_all)
};

// The text llama-server logs when its port was taken (tools/server/server.cpp, 34af94cd9).
inline constexpr std::string_view kPortTakenLine = "couldn't bind HTTP server socket";
// Ports tried before a start is given up.
inline constexpr int kPortAttempts = 4;

// A free TCP port on 127.0.0.1 at the moment of asking (the kernel's choice for port 0).
uint16_t free_loopback_port();

class LlamaServer {
  public:
    // Starts it and waits until /health answers 200. A start whose port was taken meanwhile (it exits
    // saying so) is retried on another port. IoError when it cannot start, exits, or is not healthy
    // within the timeout (its log's last lines in the message); Interrupted.
    LlamaServer(ServerOptions o, const Events& ev);
    ~LlamaServer() = default;  // the child's destructor stops it
    LlamaServer(const LlamaServer&) = delete;
    LlamaServer& operator=(const LlamaServer&) = delete;

    std::string url(std::string_view path) const;
    // The command as run (the last port tried).
    const std::vector<std::string>& command() const { return command_; }
    const std::string& log_path() const { return o_.log_path; }
    uint64_t timeout_s() const { return o_.timeout_s; }
    // IoError when it has exited, or exits within `grace_ms` (a failed transfer may arrive just before
    // the exit of the server that dropped it is seen).
    void check_running(long grace_ms = 0);
    // Stops it, then throws IoError: `what`, its exit, and its log's last lines.
    [[noreturn]] void fail(const std::string& what);
    // Stops it (idempotent).
    void stop();

  private:
    bool start_on(uint16_t port);  // false: the port was taken
    std::string log_tail() const;

    ServerOptions o_;
    const Events& ev_;
    uint16_t port_ = 0;
    std::vector<std::string> command_;
    std::optional<BackgroundChild> child_;
};

// llama-server's endpoints as eval uses them: /completion generates from a raw prompt, /apply-template
// wraps a prompt in the model's chat template (as /v1/chat/completions does).
inline constexpr std::string_view kCompletionPath = "/completion";
inline constexpr std::string_view kApplyTemplatePath = "/apply-template";
// A .jsonl panel's chat line goes to the OpenAI-compatible chat endpoint, the server started with --jinja
// (docs/eval.md, "Chat and tools").
inline constexpr std::string_view kChatPath = "/v1/chat/completions";
// How eval.json names the endpoints a generation went through.
std::string endpoint_words(bool chat);

// A sampled generation's temperature (above 0) and seed. Without one, a request is greedy.
struct Sampling {
    double temperature = 0;
    uint32_t seed = 0;
};
// The sampler llama-server is given above temperature 0: its own defaults at 34af94cd9, written out so
// that the request says what it samples with.
inline constexpr int kSampleTopK = 40;
inline constexpr double kSampleTopP = 0.95, kSampleMinP = 0.05;

// The /completion request's settings (every field but "prompt"), as JSON text: greedy, or sampled.
std::string completion_request_settings(uint64_t gen_tokens, const std::optional<Sampling>& s = {});
// A /completion request: `prompt` with those settings.
std::string completion_body(const std::string& prompt, uint64_t gen_tokens,
                            const std::optional<Sampling>& s = {});

// A chat request: `line`, a JSON object holding "messages" and, when offered, "tools", with the
// settings of completion_request_settings but return_tokens, which the chat endpoint does not honour.
std::string chat_body(const nlohmann::json& line, uint64_t gen_tokens, const std::optional<Sampling>& s = {});

// The seed of sample `sample` (from 0) of prompt `prompt` (its 0-based index in the panel) at
// `temperature`, from eval's --seed `seed` (docs/eval.md, "Sampling"): the first 4 bytes, big-endian, of
// the SHA-256 of the text "SEED/T/PROMPT/SAMPLE", T as JSON writes the number (0.7, 1.0); 0xFFFFFFFF,
// llama.cpp's "a random seed", becomes 0xFFFFFFFE. It depends on nothing else: not the model, the
// order the requests are sent in, nor the slots.
uint32_t sample_seed(uint64_t seed, double temperature, uint64_t prompt, uint64_t sample);

// One generation, as llama-server returned it.
struct Generation {
    std::vector<int32_t> tokens;
    bool eog = false;  // stop_type "eos"
    std::string text;  // "content"
};
// Reads a /completion reply (return_tokens). Empty on success, else what is wrong with it.
std::string parse_completion(const std::string& body, uint64_t gen_tokens, uint64_t n_vocab, Generation& g);

// One chat reply, as llama-server returned it.
struct ChatReply {
    bool eog = false;        // finish_reason "stop" or "tool_calls" ("length": false)
    std::string text;        // message.content ("" when null)
    int64_t tokens = 0;      // usage.completion_tokens
    nlohmann::json message;  // choices[0].message
};
// Reads a /v1/chat/completions reply. Empty on success, else what is wrong with it.
std::string parse_chat(const std::string& body, uint64_t gen_tokens, ChatReply& r);

// An /apply-template request: `prompt` as one user message.
std::string template_body(const std::string& prompt);
// The reply's "prompt"; null when the reply is not a JSON object with a "prompt" string.
std::optional<std::string> parse_template_reply(const std::string& body);

// POSTs `bodies` to `url`, at most `parallel` at once, each given at most the server's timeout_s() (a
// request that runs out gets a reply with timed_out set), handing each reply to `on_reply(index, reply)`
// as it arrives. Between arrivals it checks for an interrupt (Interrupted) and that the server still
// runs (fail()). Returns when every request has its reply.
void post_all(LlamaServer& server, std::string_view path, const std::vector<std::string>& bodies,
              uint64_t parallel, const std::function<void(size_t, HttpReply&&)>& on_reply);
// The same, body i to paths[i].
void post_all(LlamaServer& server, const std::vector<std::string_view>& paths,
              const std::vector<std::string>& bodies, uint64_t parallel,
              const std::function<void(size_t, HttpReply&&)>& on_reply);

}  // namespace gguf_reap::llama_cpp
