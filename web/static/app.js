// Live updates for the pages, which work without it: a run page follows its run over
// Server-Sent Events (resuming with Last-Event-ID, which the browser sends itself) and
// fetches its live part again at each change; other pages, and a run page whose event
// stream fails, poll their live part. Buttons that cancel ask first.
(function () {
  "use strict";
  var live = document.getElementById("live");

  function swap(html) {
    var open = {};
    live.querySelectorAll("details[open]").forEach(function (d, i) { open[i] = true; });
    live.innerHTML = html;
    live.querySelectorAll("details").forEach(function (d, i) { if (open[i]) d.open = true; });
  }

  function refresh() {
    var u = new URL(location.href);
    u.searchParams.set("partial", "1");
    return fetch(u, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(swap);
  }

  function poll(seconds, until) {
    var t = setInterval(function () {
      if (document.hidden) return;
      refresh().then(function () {
        if (until && until()) clearInterval(t);
      }).catch(function () {});
    }, seconds * 1000);
  }

  function runStatus() {
    var b = document.getElementById("run-status");
    return b ? b.dataset.status : "";
  }
  function ended() { var s = runStatus(); return s !== "queued" && s !== "running"; }

  if (live && live.dataset.run) {
    var id = live.dataset.run;
    if (!ended()) {
      if (window.EventSource) {
        var es = new EventSource("/api/v1/runs/" + encodeURIComponent(id) + "/events");
        var failures = 0;
        es.addEventListener("run", function () { failures = 0; refresh(); });
        es.addEventListener("end", function () { es.close(); refresh(); });
        es.onerror = function () {
          if (++failures >= 3 || es.readyState === EventSource.CLOSED) {
            es.close();
            poll(2, ended);
          }
        };
      } else {
        poll(2, ended);
      }
    }
  } else if (live && live.dataset.refresh) {
    poll(Number(live.dataset.refresh) || 10);
  }

  document.addEventListener("submit", function (e) {
    var b = e.submitter || e.target.querySelector("button[data-confirm]");
    if (b && b.dataset && b.dataset.confirm && !confirm(b.dataset.confirm)) e.preventDefault();
  });
})();
