import LoginKitCommandLine

/// `loginkit`: the command-line tool over file stores (docs/cli.md). A `postgres://` store is
/// handed to `loginkit-fleet`, so that this executable links no swift-nio.
@main
enum LoginKitMain {
    static func main() async {
        await LoginKitCLI.main(fleet: nil)
    }
}
