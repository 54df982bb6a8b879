// Sign-in: the gateway's users and passwords (the same check as its HTTP interface).
"use strict";
(function () {
  const form = document.getElementById("login-form");
  const error = document.getElementById("login-error");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    const body = JSON.stringify({
      user: document.getElementById("user").value,
      password: document.getElementById("password").value,
    });
    try {
      const response = await fetch("/console/api/login", {
        method: "POST", credentials: "same-origin", body,
        headers: { "Content-Type": "application/json", "X-Dpch-Console": "1" },
      });
      const data = await response.json();
      if (!response.ok) {
        error.textContent = (data.error && data.error.message) || "sign-in failed";
        return;
      }
      const next = new URLSearchParams(window.location.search).get("next");
      // the fragment is a shared query (/play#q=…): the redirect to this page kept it; /play reads it
      window.location.assign((next === "/admin" && data.owner ? "/admin" : "/play") + window.location.hash);
    } catch (e) {
      error.textContent = "the server did not answer";
    }
  });
})();
