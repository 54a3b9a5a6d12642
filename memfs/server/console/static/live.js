// The console's live pages (memfs/server/console/live.py, docs/console.md "Live").
// A page that can go stale holds <div id="live" data-src data-mode> and a hidden notice. This
// opens an EventSource on data-src (same origin, the session cookie) and, at the first change
// to what the page shows, reloads it (data-mode "reload": a listing, unless a field of it is
// being typed into) or shows the notice (data-mode "notice": an item, an edit page). What a
// change says is agent-written: it is only ever inserted as text (textContent).
(function () {
  "use strict";
  var live = document.getElementById("live");
  var notice = document.getElementById("live-notice");
  if (!live || !notice || typeof window.EventSource === "undefined") {
    return;
  }

  function typing() {
    var fields = document.querySelectorAll("input:not([type=hidden]), textarea, select");
    for (var i = 0; i < fields.length; i += 1) {
      var field = fields[i];
      if (field === document.activeElement) {
        return true;
      }
      if ((field.value !== undefined && field.defaultValue !== undefined) &&
          field.value !== field.defaultValue) {
        return true;
      }
    }
    return false;
  }

  var source = new window.EventSource(live.getAttribute("data-src"));
  source.addEventListener("change", function (event) {
    var what = "";
    try {
      var data = JSON.parse(event.data);
      what = typeof data.what === "string" ? data.what : "";
    } catch (ignored) {
      what = "";
    }
    source.close(); // the page is stale now: one notice (or one reload) is enough
    if (live.getAttribute("data-mode") === "reload" && !typing()) {
      window.location.reload();
      return;
    }
    notice.querySelector(".live-what").textContent = what;
    notice.hidden = false;
    document.body.setAttribute("data-live", "changed");
  });
  source.addEventListener("open", function () {
    document.body.setAttribute("data-live", "open");
  });
}());
