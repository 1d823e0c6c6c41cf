// LoginKit re-exports the transport layer so that `import LoginKit` is all a user needs:
// HTTPTypes' request/response values, the HTTPTransport protocol and CurlHTTPClient.
@_exported public import HTTPTypes
@_exported public import LoginKitCurl
@_exported public import LoginKitHTTP
