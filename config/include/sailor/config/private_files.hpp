#pragma once
/// Files a job writes (checkpoints, logs, tokens, state) are the user's alone: 0600 files in
/// 0700 folders. A process restricts what it creates once, in main(), and the places that
/// create such files also set the mode explicitly, so that a library used by a program that
/// did not call restrict_new_files() still keeps them private.

#include <filesystem>
#include <string>

#include "sailor/config/error.hpp"

namespace sailor::files {

/// Mode of a file of a job's state: read and write by the owner only.
inline constexpr unsigned private_file_mode = 0600;
/// Mode of a folder of a job's state: the owner only.
inline constexpr unsigned private_folder_mode = 0700;

/// Files and folders this process (and the processes it starts) creates from now on get no
/// permission for group or others (a umask of 077). Called once, at the start of main().
void restrict_new_files();

/// Sailor's own folder of this user's state: $XDG_CACHE_HOME/sailor, else ~/.cache/sailor, else
/// sailor-UID in the temporary folder.
std::filesystem::path cache_folder();

/// Creates `folder` and its missing parents, each 0700 (a folder that exists keeps its mode:
/// it may be the user's own, such as the current folder). The error names the folder.
status make_private_folder(const std::filesystem::path& folder);

/// Sets an existing file to 0600; the error names the file.
status make_private(const std::filesystem::path& file);

/// Writes `text` to `file` (replaced if present) as a 0600 file; the error names the file.
status write_private_file(const std::filesystem::path& file, const std::string& text);

}  // namespace sailor::files
