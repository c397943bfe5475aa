#pragma once
// The interface of libsailor_sentencepiece.so, the module that wraps Debian's libsentencepiece.
//
// Why a module opened with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) rather than a linked library:
// libsentencepiece carries its own copy of protobuf-lite and exports its symbols. Linked into a
// program that also loads LibTorch's libprotobuf, one copy's functions answer the other's calls
// (the programs crashed in libprotobuf's static initializers, before main). Opened locally with
// deep binding, the module and libsentencepiece see their own protobuf and nothing else sees it.
//
// Both sides are built together by the same compiler, so the table passes standard types.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sailor::models::detail {

struct sentencepiece_api {
  int version;
  /// A processor for the serialized model in `bytes`, or nullptr with `error` set.
  void* (*load)(const std::string& bytes, std::string& error);
  void (*release)(void* processor);
  bool (*encode)(const void* processor, std::string_view text, std::vector<int>& ids, std::string& error);
  bool (*decode)(const void* processor, const std::vector<int>& ids, std::string& text, std::string& error);
  int (*pieces)(const void* processor);
  /// Whether `id` stands for text (not a control piece, the unknown piece or an unused one).
  bool (*is_text)(const void* processor, int id);
  /// SentencePieceTrainer::Train with these arguments (name, value).
  bool (*train)(const std::vector<std::pair<std::string, std::string>>& args, std::string& error);
};

inline constexpr int sentencepiece_api_version = 1;
inline constexpr const char* sentencepiece_module_entry = "sailor_sentencepiece_api";

}  // namespace sailor::models::detail
