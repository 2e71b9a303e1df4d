// The interactive reference over the live document. "Authorize" takes a bearer token, which
// Swagger UI keeps in memory for this page only (persistAuthorization is off); "Try it out"
// calls this same server.
window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: '/v1/openapi.json',
    dom_id: '#swagger-ui',
    deepLinking: true,
    persistAuthorization: false,
    displayRequestDuration: true,
    // Opens with the operations folded under their tags: a reader picks a resource first.
    docExpansion: 'none',
    // The public validator badge would send the document elsewhere.
    validatorUrl: null,
  });
});
