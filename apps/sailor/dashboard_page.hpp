#pragma once
// The dashboard's page, script and style, compiled into the binary (no CDN, no bundler): plain
// SVG charts drawn by a small hand-written script that polls the JSON API twice a second and
// redraws the page. The texts are the files in apps/sailor/dashboard/ (index.html, dashboard.js,
// dashboard.css), each turned into one of these functions at build time by
// cmake/embed_text.cmake. The loss curve is fetched incrementally (?since=) and refetched whole
// when the coordinator says it was rewound (a plan resumed from an earlier checkpoint).

#include <string_view>

namespace sailor::app {

std::string_view dashboard_html();
std::string_view dashboard_js();
std::string_view dashboard_css();

}  // namespace sailor::app
