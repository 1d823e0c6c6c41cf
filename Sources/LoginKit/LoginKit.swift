// What `import LoginKit` brings besides LoginKit's own types: the modules below it, whose public
// declarations are exactly what LoginKit's API uses or a user needs beside it — HTTPTypes' request
// and response values; LoginKitHTTP's HTTPTransport protocol, NetworkError and the protocol the six
// error types share (LoginKitError, ErrorDetails); LoginKitCurl's CurlHTTPClient; LoginKitJOSE's
// types of ID-token verification, signing keys and key sets. The package's own helpers in those
// modules are `package` (or `@_spi`), so none of them lands in a user's namespace.

@_exported public import HTTPTypes
@_exported public import LoginKitCurl
@_exported public import LoginKitHTTP
@_exported public import LoginKitJOSE
