// LoginKit re-exports the transport layer so that `import LoginKit` is all a user needs:
// HTTPTypes' request/response values, the HTTPTransport protocol, CurlHTTPClient, and the JOSE
// types its errors and verifiers use.
@_exported public import HTTPTypes
@_exported public import LoginKitCurl
@_exported public import LoginKitHTTP
@_exported public import LoginKitJOSE
