// What `import LoginKit` brings besides LoginKit's own types: the types of the modules below it
// that LoginKit's API uses or that a user needs beside it — HTTPTypes' request and response
// values, the HTTPTransport protocol and its error, the protocol the six error types share
// (LoginKitError, ErrorDetails), CurlHTTPClient, and the JOSE types of ID-token verification.
// Named one by one (as Hummingbird's Exports.swift does), so that the package's helpers never land
// in a user's namespace; everything else in those modules is `package`.

@_exported public import struct HTTPTypes.HTTPField
@_exported public import struct HTTPTypes.HTTPFields
@_exported public import struct HTTPTypes.HTTPRequest
@_exported public import struct HTTPTypes.HTTPResponse

@_exported public import struct LoginKitHTTP.ErrorDetails
@_exported public import protocol LoginKitHTTP.HTTPTransport
@_exported public import protocol LoginKitHTTP.LoginKitError
@_exported public import struct LoginKitHTTP.NetworkError

@_exported public import class LoginKitCurl.CurlHTTPClient

@_exported public import struct LoginKitJOSE.IDTokenVerifier
@_exported public import enum LoginKitJOSE.JSONValue
@_exported public import struct LoginKitJOSE.JWK
@_exported public import protocol LoginKitJOSE.JWKSProvider
@_exported public import class LoginKitJOSE.JWKSSource
@_exported public import struct LoginKitJOSE.JWKSet
@_exported public import enum LoginKitJOSE.JWSAlgorithm
@_exported public import struct LoginKitJOSE.JWTClaims
@_exported public import struct LoginKitJOSE.SigningKey
@_exported public import struct LoginKitJOSE.StaticJWKS
@_exported public import struct LoginKitJOSE.SymmetricKey
@_exported public import struct LoginKitJOSE.TokenVerificationError
@_exported public import struct LoginKitJOSE.VerifiedJWT
