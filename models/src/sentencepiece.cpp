// SentencePiece through the module that wraps Debian's libsentencepiece (see
// sentencepiece.hpp and sentencepiece_module.hpp).
#include <sailor/models/sentencepiece.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "sentencepiece_module.hpp"

namespace sailor::models {
namespace {

namespace fs = std::filesystem;

// The module's place: SAILOR_SENTENCEPIECE_MODULE when set, else ../lib/sailor/ from the
// program's folder (the build tree's bin/ and tests/, an installation's bin/).
std::string module_path() {
  if (const char* set = std::getenv("SAILOR_SENTENCEPIECE_MODULE"); set != nullptr && *set != '\0') return set;
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  return (exe.parent_path().parent_path() / "lib" / "sailor" / "libsailor_sentencepiece.so").string();
}

// The module's table, opened once; an error says what is missing.
result<const detail::sentencepiece_api*> module_api() {
  static std::once_flag once;
  static const detail::sentencepiece_api* api = nullptr;
  static std::string why;
  std::call_once(once, [] {
    const std::string path = module_path();
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      why = std::string("cannot open the SentencePiece module: ") + ::dlerror();
      return;
    }
    using entry = const detail::sentencepiece_api* (*)();
    auto get = reinterpret_cast<entry>(::dlsym(handle, detail::sentencepiece_module_entry));
    if (get == nullptr || get()->version != detail::sentencepiece_api_version) {
      why = path + " is not this build's SentencePiece module";
      return;
    }
    api = get();  // the module stays open for the process's life
  });
  if (api == nullptr) return error::failed(why);
  return api;
}

}  // namespace

result<sentencepiece_tokenizer> sentencepiece_tokenizer::load(const std::string& model_file) {
  std::ifstream in(model_file, std::ios::binary);
  if (!in)
    return error::not_found(model_file, "data.tokenizer.model", "cannot read the SentencePiece model file");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return parse(bytes.str(), model_file);
}

result<sentencepiece_tokenizer> sentencepiece_tokenizer::parse(const std::string& model_bytes,
                                                              const std::string& origin) {
  auto api = module_api();
  if (!api) return api.error();
  std::string why;
  void* processor = (*api)->load(model_bytes, why);
  if (processor == nullptr)
    return error::invalid_input(origin, "data.tokenizer.model", "not a SentencePiece model: " + why);
  sentencepiece_tokenizer out;
  out.api_ = *api;
  out.processor_ = std::shared_ptr<void>(processor, (*api)->release);
  out.origin_ = origin;
  if (out.vocabulary() <= 0)
    return error::invalid_input(origin, "data.tokenizer.model", "a SentencePiece model without pieces");
  return out;
}

result<std::vector<std::int64_t>> sentencepiece_tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  std::string why;
  if (!api_->encode(processor_.get(), text, ids, why))
    return error::invalid_input(origin_, "data.tokenizer.model", "cannot encode: " + why);
  return std::vector<std::int64_t>(ids.begin(), ids.end());
}

result<std::string> sentencepiece_tokenizer::decode(const std::vector<std::int64_t>& ids) const {
  std::vector<int> narrow;
  narrow.reserve(ids.size());
  for (auto id : ids) {
    if (id < 0 || id >= vocabulary())
      return error::invalid_input(origin_, "", "id " + std::to_string(id) + " is outside the vocabulary of " +
                                                 std::to_string(vocabulary()));
    narrow.push_back(static_cast<int>(id));
  }
  std::string text, why;
  if (!api_->decode(processor_.get(), narrow, text, why))
    return error::invalid_input(origin_, "", "cannot decode: " + why);
  return text;
}

int sentencepiece_tokenizer::vocabulary() const { return api_->pieces(processor_.get()); }

bool sentencepiece_tokenizer::is_text(std::int64_t id) const {
  return id >= 0 && id < vocabulary() && api_->is_text(processor_.get(), static_cast<int>(id));
}

std::int64_t sentencepiece_tokenizer::first_text_id() const {
  for (int id = 0; id < vocabulary(); ++id)
    if (is_text(id)) return id;
  return 0;
}

status sentencepiece_tokenizer::train(const std::vector<std::pair<std::string, std::string>>& args) {
  auto api = module_api();
  if (!api) return api.error();
  std::string why;
  if (!(*api)->train(args, why)) return error::failed("SentencePiece's trainer: " + why);
  return {};
}

}  // namespace sailor::models
