/// Whether the request being sent may go over plain HTTP, and around any proxy, to a link-local
/// address (`URLParts.isLinkLocal`: `169.254.0.0/16`, `fe80::/10`), where cloud instance metadata
/// services answer. Set only around an identity source's request to such a service; every other
/// request — a provider's endpoints above all, which discovery may name — keeps plain HTTP to
/// loopback alone.
package enum LinkLocalHTTP {
    /// `true` within `LinkLocalHTTP.$isAllowed.withValue(true) { … }` only.
    @TaskLocal package static var isAllowed = false
}
