// pgbeat dashboard: live refresh of [data-live] regions and confirm prompts.
// Pages work without this file; it only refreshes what is on screen and asks before
// destructive actions. No eval, no inline code: it runs under a strict CSP.
(function () {
  "use strict";
  var body = document.body;
  var every = parseInt(body.getAttribute("data-refresh") || "5", 10) * 1000;
  var control = document.getElementById("live-control");
  var toggle = document.getElementById("live-toggle");
  var statusText = document.getElementById("live-status");
  var timer = null, failures = 0, inFlight = false;
  var STORE = "pgbeat-live";

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var button = event.submitter;
    var message = (button && button.getAttribute("data-confirm")) || form.getAttribute("data-confirm");
    if (message && !window.confirm(message)) { event.preventDefault(); }
  });

  if (!control || !toggle || !every || !document.querySelector("[data-live]")) { return; }
  control.hidden = false;
  toggle.checked = localStorage.getItem(STORE) !== "off";

  function say(text) { if (statusText) { statusText.textContent = text; } }

  function busy(region) {
    return region.contains(document.activeElement) && document.activeElement !== document.body ||
      region.querySelector("input[type=checkbox]:checked, details[open]") !== null;
  }

  function refresh() {
    if (inFlight || document.visibilityState !== "visible" || !toggle.checked) { return; }
    inFlight = true;
    fetch(window.location.href, { headers: { "X-Pgbeat-Live": "1" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok || response.redirected) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        var paused = false;
        document.querySelectorAll("[data-live][id]").forEach(function (region) {
          var replacement = fresh.getElementById(region.id);
          if (!replacement) { return; }
          if (busy(region)) { paused = true; return; }
          region.replaceWith(document.importNode(replacement, true));
        });
        var clock = fresh.getElementById("db-now"), here = document.getElementById("db-now");
        if (clock && here) { here.replaceWith(document.importNode(clock, true)); }
        failures = 0;
        say(paused ? "paused while selecting" : "updated " + new Date().toLocaleTimeString());
      })
      .catch(function () {
        failures += 1;
        say("connection lost, retrying");
      })
      .finally(function () { inFlight = false; schedule(); });
  }

  function schedule() {
    clearTimeout(timer);
    if (!toggle.checked || document.visibilityState !== "visible") { return; }
    var wait = failures ? Math.min(60000, every * Math.pow(2, failures)) : every;
    timer = setTimeout(refresh, wait);
  }

  toggle.addEventListener("change", function () {
    localStorage.setItem(STORE, toggle.checked ? "on" : "off");
    say(toggle.checked ? "" : "paused");
    if (toggle.checked) { refresh(); } else { clearTimeout(timer); }
  });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") { refresh(); } else { clearTimeout(timer); }
  });
  schedule();
})();
