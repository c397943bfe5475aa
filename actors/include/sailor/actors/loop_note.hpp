#pragma once
/// The closed loop's lines for the supervisor's event log (issue 14), from its own process.
#include <caf/atom.hpp>

namespace sailor::actors {

/// To the supervisor, with a line of text: the closed loop learned something the event log
/// and `sailor status` should show (a link's correction changed).
using loop_note_atom = caf::atom_constant<caf::atom("loopnote")>;

}  // namespace sailor::actors
