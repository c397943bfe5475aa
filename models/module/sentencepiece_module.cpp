// libsailor_sentencepiece.so: Debian's libsentencepiece behind the table of
// models/src/sentencepiece_module.hpp (why a module: see there).
#include "sentencepiece_module.hpp"

#include <unordered_map>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

namespace {

using sentencepiece::SentencePieceProcessor;
namespace detail = sailor::models::detail;

const SentencePieceProcessor& processor_of(const void* p) { return *static_cast<const SentencePieceProcessor*>(p); }

void* load(const std::string& bytes, std::string& error) {
  auto* p = new SentencePieceProcessor();
  const auto status = p->LoadFromSerializedProto(bytes);
  if (status.ok()) return p;
  error = status.ToString();
  delete p;
  return nullptr;
}

void release(void* p) { delete static_cast<SentencePieceProcessor*>(p); }

bool encode(const void* p, std::string_view text, std::vector<int>& ids, std::string& error) {
  const auto status = processor_of(p).Encode(text, &ids);
  if (!status.ok()) error = status.ToString();
  return status.ok();
}

bool decode(const void* p, const std::vector<int>& ids, std::string& text, std::string& error) {
  const auto status = processor_of(p).Decode(ids, &text);
  if (!status.ok()) error = status.ToString();
  return status.ok();
}

int pieces(const void* p) { return processor_of(p).GetPieceSize(); }

bool is_text(const void* p, int id) {
  const auto& sp = processor_of(p);
  return !sp.IsControl(id) && !sp.IsUnknown(id) && !sp.IsUnused(id);
}

bool train(const std::vector<std::pair<std::string, std::string>>& args, std::string& error) {
  const std::unordered_map<std::string, std::string> kwargs(args.begin(), args.end());
  const auto status = sentencepiece::SentencePieceTrainer::Train(kwargs);
  if (!status.ok()) error = status.ToString();
  return status.ok();
}

const detail::sentencepiece_api api = {detail::sentencepiece_api_version, load, release, encode, decode,
                                       pieces, is_text, train};

}  // namespace

extern "C" __attribute__((visibility("default"))) const detail::sentencepiece_api* sailor_sentencepiece_api() {
  return &api;
}
