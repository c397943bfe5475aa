// The dashboard's page and style. The script is in dashboard_script.cpp.
#include "dashboard_page.hpp"

namespace sailor::app {

std::string_view dashboard_html() {
  return R"SAILOR(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sailor dashboard</title>
<link rel="stylesheet" href="/dashboard.css">
</head>
<body>
<header>
  <h1>Sailor</h1>
  <span id="job"></span>
  <span id="phase" class="badge">connecting</span>
  <span id="updated" class="muted"></span>
</header>
<div id="remote-warning" class="warning" hidden></div>
<main>
  <section id="cluster-section">
    <h2>Cluster</h2>
    <div id="zones" class="zones"></div>
    <ul id="links" class="links"></ul>
  </section>
  <section id="plan-section">
    <h2>Plan <span id="plan-version" class="muted"></span></h2>
    <div id="plan-summary" class="summary"></div>
    <div class="grid-wrap"><table id="plan-grid" data-stages="0"></table></div>
  </section>
  <section id="training-section">
    <h2>Training</h2>
    <div id="training-summary" class="summary">no training reported yet</div>
    <div class="charts">
      <figure>
        <figcaption><span class="loss">Loss</span><span id="val-legend" hidden> and
          <span class="val-loss">validation loss</span></span>
          <span class="muted">(dashed lines: re-plans)</span></figcaption>
        <svg id="loss-chart" data-points="0" data-val-points="0" viewBox="0 0 560 220" role="img"
             aria-label="loss per iteration"></svg>
      </figure>
      <figure>
        <figcaption>Iteration time, s: <span class="measured">measured</span> vs
          <span class="predicted">predicted</span></figcaption>
        <svg id="time-chart" data-points="0" viewBox="0 0 560 220" role="img"
             aria-label="iteration time, measured and predicted"></svg>
      </figure>
      <figure>
        <figcaption>Tokens/s: <span class="measured">measured</span> vs
          <span class="predicted">predicted</span></figcaption>
        <svg id="tps-chart" data-points="0" viewBox="0 0 560 220" role="img"
             aria-label="tokens per second"></svg>
      </figure>
    </div>
    <p class="muted" id="validation-note"></p>
    <p><a id="trace-link" href="/api/trace" download="sailor-trace.json">Download the newest
      iterations' timeline</a> <span class="muted">(Chrome trace JSON of the ranks' measured
      phases; open it in Perfetto or chrome://tracing)</span></p>
  </section>
  <section id="events-section">
    <h2>Events</h2>
    <table id="events">
      <thead><tr><th>time</th><th>kind</th><th>node</th><th>what happened</th></tr></thead>
      <tbody></tbody>
    </table>
  </section>
</main>
<footer id="bound" class="muted"></footer>
<script src="/dashboard.js"></script>
</body>
</html>
)SAILOR";
}

std::string_view dashboard_css() {
  return R"SAILOR(
:root { --bg: #f6f7f9; --card: #fff; --ink: #1d2330; --muted: #6b7280; --line: #d9dde3;
        --measured: #1f6feb; --predicted: #d97706; --loss: #0f766e; --val-loss: #7c3aed;
        --replan: #b91c1c; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, sans-serif; background: var(--bg); color: var(--ink); }
header { display: flex; gap: 1em; align-items: baseline; padding: .6em 1.2em;
         background: #111827; color: #f9fafb; }
header h1 { font-size: 1.2em; margin: 0; }
main { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; padding: 1em 1.2em; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 6px;
          padding: .6em 1em 1em; min-width: 0; }
#training-section, #events-section { grid-column: 1 / span 2; }
h2 { font-size: 1.05em; margin: .2em 0 .6em; }
.muted { color: var(--muted); }
header .muted { color: #9ca3af; }
.badge { display: inline-block; padding: 0 .5em; border-radius: 9px; font-size: .85em;
         background: #e5e7eb; color: #111827; }
.warning { background: #fef3c7; border-bottom: 1px solid #f59e0b; padding: .4em 1.2em; }
.zones { display: flex; flex-wrap: wrap; gap: .8em; }
.zone { border: 2px solid var(--line); border-radius: 6px; padding: .4em .6em; min-width: 14em;
        flex: 1; }
.zone h3 { margin: 0 0 .3em; font-size: 1em; }
.node { border: 1px solid var(--line); border-radius: 4px; padding: .25em .45em; margin: .3em 0;
        display: flex; justify-content: space-between; gap: .6em; }
.node.lost, .node.preempted { opacity: .6; text-decoration: line-through; }
.state-joined { background: #e0e7ff; } .state-assigned { background: #fef9c3; }
.state-ready { background: #dcfce7; } .state-training { background: #bbf7d0; }
.state-idle { background: #f3f4f6; } .state-lost { background: #fee2e2; }
.state-preempted { background: #ffedd5; }
.links { margin: .6em 0 0; padding-left: 1.2em; }
.summary { margin-bottom: .5em; }
.grid-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { border: 1px solid var(--line); padding: .25em .45em; text-align: left;
         vertical-align: top; }
th { background: #f3f4f6; font-weight: 600; }
#plan-grid td.cell { font-size: .92em; }
.charts { display: grid; grid-template-columns: repeat(3, 1fr); gap: .8em; }
figure { margin: 0; min-width: 0; }
figcaption { font-weight: 600; margin-bottom: .2em; }
svg { width: 100%; height: auto; background: #fcfcfd; border: 1px solid var(--line); }
svg .axis { stroke: #9ca3af; stroke-width: 1; }
svg text { font-size: 11px; fill: var(--muted); }
svg .series-loss { stroke: var(--loss); fill: none; stroke-width: 2; }
svg .series-measured { stroke: var(--measured); fill: none; stroke-width: 2; }
svg .series-predicted { stroke: var(--predicted); fill: none; stroke-width: 2;
                        stroke-dasharray: 6 3; }
svg .series-val-loss { stroke: var(--val-loss); fill: none; stroke-width: 1.5;
                       stroke-dasharray: 2 2; }
svg .dot-loss { fill: var(--loss); } svg .dot-measured { fill: var(--measured); }
svg .dot-val-loss { fill: var(--val-loss); }
.loss { color: var(--loss); } .val-loss { color: var(--val-loss); }
svg .replan { stroke: var(--replan); stroke-dasharray: 4 3; }
svg text.replan-label { fill: var(--replan); }
.measured { color: var(--measured); } .predicted { color: var(--predicted); }
.kind-join { background: #dcfce7; } .kind-lost, .kind-failure { background: #fee2e2; }
.kind-preempted { background: #ffedd5; } .kind-plan, .kind-resume { background: #dbeafe; }
.kind-refused, .kind-no_plan { background: #fef3c7; }
footer { padding: 0 1.2em 1em; }
@media (max-width: 900px) { main, .charts { grid-template-columns: 1fr; }
  #training-section, #events-section { grid-column: 1; } }
)SAILOR";
}

}  // namespace sailor::app
