// LoginKitViewModel: LoginViewModel<Service> (issue 6).
import LoginKit
