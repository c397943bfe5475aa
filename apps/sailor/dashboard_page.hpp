#pragma once
// The dashboard's page, script and style, compiled into the binary (no CDN, no build step):
// plain SVG charts drawn by a small hand-written script that polls the JSON API.

#include <string_view>

namespace sailor::app {

std::string_view dashboard_html();
std::string_view dashboard_js();
std::string_view dashboard_css();

}  // namespace sailor::app
